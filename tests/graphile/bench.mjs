// bench-queue's peer (issue 20): graphile-worker on the same PostgreSQL.
// `node bench.mjs DATABASE_URL [default|localqueue] [JOBS] [CONCURRENCY]`
// queues JOBS no-op jobs (addJobs, 1,000 per call), then runs one worker
// at CONCURRENCY until every job is complete (the jobs table is empty),
// and prints one JSON line: {mode, jobs, concurrency, seconds, rate}.
// `localqueue` turns on graphile-worker's batched fetch (localQueue) and
// batched completion (completeJobBatchDelay / failJobBatchDelay 0).
import { Logger, makeWorkerUtils, run } from "graphile-worker";

// Silent: a log line per job would measure the terminal, not the queue.
const logger = new Logger(() => () => {});

const [connectionString, mode = "default", jobsArg = "10000", concArg = "16"] =
  process.argv.slice(2);
const jobs = Number(jobsArg);
const concurrency = Number(concArg);

const utils = await makeWorkerUtils({ connectionString, logger });
await utils.migrate();
await utils.withPgClient((c) => c.query("DELETE FROM graphile_worker._private_jobs"));
for (let i = 0; i < jobs; i += 1000) {
  const n = Math.min(1000, jobs - i);
  await utils.addJobs(
    Array.from({ length: n }, (_, k) => ({ identifier: "noop", payload: { i: i + k } })),
  );
}

const worker = {
  connectionString,
  concurrentJobs: concurrency,
  maxPoolSize: concurrency + 2,
  pollInterval: 2000,
  ...(mode === "localqueue"
    ? { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 }
    : {}),
};
let done = 0;
const t0 = process.hrtime.bigint();
const runner = await run({
  preset: { worker },
  logger,
  noHandleSignals: true,
  taskList: {
    noop: async () => {
      done += 1;
    },
  },
});
// Complete means committed: wait until the jobs table is empty.
for (;;) {
  const { rows } = await utils.withPgClient((c) =>
    c.query("SELECT count(*)::int AS n FROM graphile_worker._private_jobs"),
  );
  if (rows[0].n === 0) break;
  await new Promise((r) => setTimeout(r, 5));
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
await runner.stop();
await utils.release();
console.log(JSON.stringify({ mode, jobs, concurrency, seconds, rate: jobs / seconds, done }));
