// Charts drawn as SVG by hand (issue 36): no library, no CDN. Each chart
// takes buckets [{start, ...}] and draws into a fixed viewBox that scales
// with its container (so it fits a 420 px screen). Colours come from
// classes in style.css (the CSP forbids inline styles); every series also
// has a legend entry in words, and each bar or point a <title> tooltip.

import { h } from './util.js';

const NS = 'http://www.w3.org/2000/svg';
const W = 600; const H = 200;
const PAD = { l: 48, r: 10, t: 10, b: 24 };

/** An SVG element with attributes and children. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** "12:30" (or "Dec 5" for day buckets) for a bucket start. */
function label(iso, bucketSeconds) {
  const d = new Date(iso);
  if (bucketSeconds >= 86400) return d.toLocaleDateString('en-US', { month: 'short', day: 'numeric' });
  return d.toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' });
}

/** A round axis maximum at or above `v` (1, 2, 5 × 10^n). */
function nice(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** The frame: y axis with its maximum, x labels at a few buckets. */
function frame(buckets, bucketSeconds, max, fmt) {
  const n = buckets.length;
  const x = (i) => PAD.l + ((W - PAD.l - PAD.r) * i) / n;
  const y = (v) => H - PAD.b - ((H - PAD.t - PAD.b) * v) / max;
  const step = Math.max(1, Math.ceil(n / 6));
  const ticks = [];
  for (let i = 0; i < n; i += step) {
    ticks.push(s('text', { x: x(i), y: H - 6, class: 'chart-tick' }, label(buckets[i].start, bucketSeconds)));
  }
  const g = s('g', {},
    s('line', { x1: PAD.l, y1: y(0), x2: W - PAD.r, y2: y(0), class: 'chart-axis' }),
    s('line', { x1: PAD.l, y1: y(max), x2: W - PAD.r, y2: y(max), class: 'chart-grid' }),
    s('text', { x: PAD.l - 4, y: y(max) + 4, class: 'chart-tick chart-y' }, fmt(max)),
    s('text', { x: PAD.l - 4, y: y(0), class: 'chart-tick chart-y' }, fmt(0)),
    ticks);
  return { g, x, y, bw: (W - PAD.l - PAD.r) / n };
}

function svg(name, title, ...children) {
  return s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-label': title, 'data-chart-svg': name }, ...children);
}

function legend(series) {
  return h('p.chart-legend', series.map(([cls, text]) => h('span', h('span.swatch', { class: cls }), text)));
}

/**
 * Stacked bars: `series` [[key, class, label]], `value(bucket, key)`.
 */
export function stacked(name, title, buckets, bucketSeconds, series, value, fmt = String) {
  const totals = buckets.map((b) => series.reduce((a, [k]) => a + (value(b, k) || 0), 0));
  const f = frame(buckets, bucketSeconds, nice(Math.max(...totals, 0)), fmt);
  const bars = [];
  buckets.forEach((b, i) => {
    let acc = 0;
    for (const [k, cls, text] of series) {
      const v = value(b, k) || 0;
      if (!v) continue;
      bars.push(s('rect', { x: f.x(i) + 1, y: f.y(acc + v), width: Math.max(1, f.bw - 2), height: f.y(acc) - f.y(acc + v),
        class: cls, 'data-bucket': i, 'data-series': k, 'data-value': v },
      s('title', {}, `${label(b.start, bucketSeconds)}: ${fmt(v)} ${text}`)));
      acc += v;
    }
  });
  return [svg(name, title, f.g, bars), legend(series.map(([, c, t]) => [c, t]))];
}

/**
 * Lines: `series` [[key, class, label]], `value(bucket, key)` (null: no
 * point); `extra(f)` may add marks (the budget line) given the frame;
 * `floor` is the least axis maximum; `dots`: a point at zero too (a
 * measured 0 ms), else zeros are only the line (counts, spend).
 */
export function lines(name, title, buckets, bucketSeconds, series, value, fmt = String, extra = null, floor = 0, dots = false) {
  const vals = buckets.flatMap((b) => series.map(([k]) => value(b, k))).filter((v) => v !== null && v !== undefined);
  const f = frame(buckets, bucketSeconds, nice(Math.max(...vals, floor, 0)), fmt);
  const marks = [];
  for (const [k, cls, text] of series) {
    const pts = [];
    buckets.forEach((b, i) => {
      const v = value(b, k);
      if (v === null || v === undefined) return;
      const cx = f.x(i) + f.bw / 2;
      pts.push(`${cx},${f.y(v)}`);
      // A point where there is something to point at; the line shows zeros.
      if (v !== 0 || dots) marks.push(s('circle', { cx, cy: f.y(v), r: 3, class: cls, 'data-bucket': i, 'data-series': k, 'data-value': v },
        s('title', {}, `${label(b.start, bucketSeconds)}: ${text} ${fmt(v)}`)));
    });
    if (pts.length > 1) marks.unshift(s('polyline', { points: pts.join(' '), class: `chart-line ${cls}`, 'data-series': k }));
  }
  return [svg(name, title, f.g, marks, extra ? extra(f) : null), legend(series.map(([, c, t]) => [c, t]))];
}

/** "850 ms", "12.3 s", "4.5 min", "2.1 h". */
export function ms(v) {
  if (v === 0) return '0';
  if (v < 1000) return `${Math.round(v)} ms`;
  if (v < 60000) return `${(v / 1000).toFixed(1)} s`;
  if (v < 3600000) return `${(v / 60000).toFixed(1)} min`;
  return `${(v / 3600000).toFixed(1)} h`;
}

/** "$0.25" */
export function usd(v) {
  return v === 0 ? '$0' : `$${v < 1 ? v.toFixed(4) : v.toFixed(2)}`;
}
