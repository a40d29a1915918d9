// A project's charts (issue 36): run outcomes over time (stacked bars),
// throughput (started and finished per bucket), run duration (median and
// 90th percentile), cost over time with the budget line, and dispatch
// latency — from one request (`GET …/charts?hours=N`, three grouped reads
// server-side). Live: run.* events redraw (debounced).

import { get, enc } from '../api.js';
import { onEvent } from '../sse.js';
import { h, debounce, code, hashParams, span } from '../util.js';
import { stacked, lines, s, ms, usd } from '../chart.js';

const HOURS = [1, 6, 24, 168, 720];
const OUTCOMES = [['exited', 'c-exited', 'exited'], ['failed', 'c-failed', 'failed'], ['stopped', 'c-stopped', 'stopped']];
const finished = (b) => OUTCOMES.reduce((a, [k]) => a + (b.finished[k] || 0), 0);

export function render(root, [project]) {
  const hours = Number(hashParams().get('hours')) || 24;
  let shown = null; // the last error shown: a poll that fails again says nothing new

  const section = (name, title, hasData, draw, none) =>
    h('section.chart', { 'data-chart': name },
      h('h2', title),
      hasData ? draw() : h('p.muted.chart-empty', { 'data-empty': name }, none));

  const draw = (c) => {
    const b = c.buckets;
    const bs = c.window.bucketSeconds;
    const anyFinished = b.some((x) => finished(x) > 0);
    const anyStarted = b.some((x) => x.started > 0);
    // Cost: the project's spend over time. Everything outside the window
    // (earlier runs, live runs) is the baseline, so the line ends at what
    // the budget counts now.
    const inWindow = b.reduce((a, x) => a + x.costUsd, 0);
    let acc = Math.max(0, c.spentUsd - inWindow);
    const cumulative = b.map((x) => (acc += x.costUsd));
    const budget = c.budget?.maxCostUsd;
    const budgetLine = (f) => (budget === undefined || budget === null ? null
      : s('g', { class: 'budget', 'data-budget': budget },
        s('line', { x1: f.x(0), y1: f.y(budget), x2: f.x(b.length), y2: f.y(budget), class: 'chart-budget' }),
        s('text', { x: f.x(b.length) - 4, y: f.y(budget) < 24 ? f.y(budget) + 14 : f.y(budget) - 4, class: 'chart-tick chart-y' }, `budget ${usd(budget)}`)));
    root.replaceChildren(
      h('div.page-head',
        h('h1', `${project}: charts`),
        h('span.chart-hours', HOURS.map((n) => h('a', { href: `#/charts/${enc(project)}?hours=${n}`, class: n === hours ? 'active' : null, 'data-hours': n },
          n >= 24 ? `${n / 24} d` : `${n} h`))),
        h('a.ghost', { href: `#/board/${enc(project)}` }, 'Board'),
        h('a.ghost', { href: `#/runs?project=${enc(project)}` }, 'Runs')),
      h('p.muted', `The last ${hours} h in buckets of ${span(bs * 1000)}. Spent ${usd(c.spentUsd)}`,
        budget !== undefined && budget !== null ? ` of a ${usd(budget)} budget` : ' (no budget)', '.'),
      h('div.charts',
        section('outcomes', 'Run outcomes', anyFinished,
          () => stacked('outcomes', 'runs finished per bucket by outcome', b, bs, OUTCOMES, (x, k) => x.finished[k]),
          'No run finished in this window.'),
        section('throughput', 'Throughput', anyStarted || anyFinished,
          () => lines('throughput', 'runs started and finished per bucket', b, bs,
            [['started', 'c-started', 'started'], ['finished', 'c-finished', 'finished']],
            (x, k) => (k === 'started' ? x.started : finished(x))),
          'No run started or finished in this window.'),
        section('duration', 'Run duration', b.some((x) => x.durationMs),
          () => lines('duration', 'run duration per bucket', b, bs,
            [['p50', 'c-p50', 'median'], ['p90', 'c-p90', '90th percentile']],
            (x, k) => (x.durationMs ? x.durationMs[k] : null), ms, null, 0, true),
          'No run that started finished in this window.'),
        section('cost', 'Cost', anyFinished || budget !== undefined,
          () => lines('cost', 'project spend over time with its budget', b, bs,
            [['spent', 'c-cost', 'spent (all runs, cumulative)']],
            (x, k, i = b.indexOf(x)) => cumulative[i], usd, budgetLine, budget || 0),
          'Nothing spent in this window and no budget.'),
        section('latency', 'Dispatch latency', b.some((x) => x.dispatchLatencyMs),
          () => lines('latency', 'time from dispatchable to claimed by a worker', b, bs,
            [['p50', 'c-p50', 'median'], ['p90', 'c-p90', '90th percentile']],
            (x, k) => (x.dispatchLatencyMs ? x.dispatchLatencyMs[k] : null), ms, null, 0, true),
          'No run was claimed in this window.')));
  };

  const load = async () => {
    try {
      draw(await get(`/api/v1/projects/${enc(project)}/charts?hours=${hours}`));
      shown = null;
    } catch (e) {
      const msg = e.status === 404 ? `No project named ${project}.` : `Could not load the charts: ${e.message}`;
      if (shown === msg) return;
      shown = msg;
      root.replaceChildren(h('h1', `${project}: charts`), h('p.error', { role: 'alert' }, msg),
        e.status === 400 ? h('p.muted', 'Pick a window: ', code('?hours=24')) : null);
    }
  };
  const reload = debounce(load, 500);
  const off = onEvent((e) => { if (/^run\./.test(e.topic) && e.topic !== 'run.output_appended') reload(); });
  load();
  return off;
}
