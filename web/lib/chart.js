// A small SVG line chart, drawn by hand (no library): time on x, one or more series on y, a readout
// that follows the pointer (or the arrow keys when the chart has focus), redrawn on resize. The time axis
// is in minutes (the live charts) or in days (the usage charts, in UTC days as the server counts them).

import { h, clock } from './dom.js';

const MARGIN = { top: 12, right: 14, bottom: 26, left: 48 };

function niceStep(max, ticks) {
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10;
  return step * mag;
}

const DAY_MS = 86400000;
const dayFmt = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });

/** A UTC day as the day axis names it: "Nov 30". */
export function dayLabel(ms) {
  return dayFmt.format(new Date(ms));
}

/** The x axis's ticks, {t, text}, for `axis` minutes or days, as many as fit in `fit` labels. */
function xTicksFor(axis, x0, x1, fit) {
  const span = x1 - x0;
  const ticks = [];
  if (axis === 'days') {
    // On UTC midnights, every 1, 2, 3… days: a usage period is a UTC day.
    const stepDays = [1, 2, 3, 5, 7, 10, 15].find((d) => span / (d * DAY_MS) <= fit) || 15;
    const stepMs = stepDays * DAY_MS;
    for (let t = Math.ceil(x0 / DAY_MS) * DAY_MS; t <= x1; t += stepMs) ticks.push({ t, text: dayLabel(t) });
    return ticks;
  }
  // on whole minutes
  const stepMin = [1, 2, 5, 10, 15, 30, 60].find((m) => span / (m * 60000) <= fit) || 60;
  const stepMs = stepMin * 60000;
  for (let t = Math.ceil(x0 / stepMs) * stepMs; t <= x1; t += stepMs) {
    ticks.push({ t, text: new Date(t).toLocaleTimeString([], { hour: 'numeric', minute: '2-digit' }) });
  }
  return ticks;
}

function yScaleFor(maxValue, minMax) {
  const top = Math.max(maxValue, minMax);
  const step = niceStep(top, 4);
  const max = Math.ceil(top / step) * step;
  const ticks = [];
  for (let v = 0; v <= max + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return { max, ticks };
}

/**
 * options: { label, series: [{key, label, className}], format(v) → text, tickFormat(v) → the y axis's
 * text (format by default), unit (legend suffix), minMax, area: key, height, axis: 'minutes' | 'days' }
 * update({ x0, x1, data: {key: [[t, v], ...]} }) redraws.
 */
export function lineChart({
  label, series, format = String, tickFormat = format, unit = '', minMax = 1, area = null, height = 170, axis = 'minutes',
}) {
  const timeText = axis === 'days' ? dayLabel : clock;
  const svg = h('svg:svg', { class: 'chart-svg', role: 'img', 'aria-label': label, height, focusable: 'false' });
  const frame = h('div', { class: 'chart-frame', tabindex: '0', 'aria-label': `${label}: use the left and right arrow keys to read values` }, svg);
  const values = new Map(series.map((s) => [s.key, h('span', { class: 'legend-value' }, '—')]));
  const when = h('span', { class: 'legend-time' }, '');
  const legend = h('div', { class: 'chart-legend' },
    series.map((s) => h('span', { class: 'legend-item' },
      h('span', { class: `legend-swatch ${s.className}`, 'aria-hidden': 'true' }), `${s.label} `, values.get(s.key))),
    when);
  const el = h('div', { class: 'chart' }, legend, frame);

  let state = null;
  let cursor = null; // index into the first series, or null for "latest"
  let width = 0;

  function pointsOf(key) {
    return (state && state.data[key]) || [];
  }

  function showReadout() {
    const first = pointsOf(series[0].key);
    if (!first.length) {
      for (const v of values.values()) v.textContent = '—';
      when.textContent = '';
      return;
    }
    const i = cursor === null ? first.length - 1 : Math.min(cursor, first.length - 1);
    const t = first[i][0];
    for (const s of series) {
      const pts = pointsOf(s.key);
      const p = pts.length ? pts.reduce((best, q) => (Math.abs(q[0] - t) < Math.abs(best[0] - t) ? q : best)) : null;
      values.get(s.key).textContent = p ? `${format(p[1])}${unit}` : '—';
    }
    when.textContent = cursor === null ? `latest · ${timeText(t)}` : timeText(t);
  }

  function render() {
    width = frame.clientWidth || width || 600;
    svg.setAttribute('width', width);
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.replaceChildren();
    if (!state) return;
    const { x0, x1 } = state;
    const plotW = Math.max(10, width - MARGIN.left - MARGIN.right);
    const plotH = height - MARGIN.top - MARGIN.bottom;
    let maxValue = 0;
    for (const s of series) for (const [, v] of pointsOf(s.key)) maxValue = Math.max(maxValue, v);
    const y = yScaleFor(maxValue, minMax);
    const sx = (t) => MARGIN.left + ((t - x0) / Math.max(1, x1 - x0)) * plotW;
    const sy = (v) => MARGIN.top + plotH - (v / y.max) * plotH;

    const grid = h('svg:g', { class: 'chart-grid' });
    for (const v of y.ticks) {
      const yy = Math.round(sy(v)) + 0.5;
      grid.append(h('svg:line', { x1: MARGIN.left, x2: MARGIN.left + plotW, y1: yy, y2: yy }));
      grid.append(h('svg:text', { x: MARGIN.left - 8, y: yy + 4, 'text-anchor': 'end', class: 'chart-tick' }, tickFormat(v)));
    }
    // x ticks, as many as fit (a label needs about 70 px)
    const fit = Math.max(2, Math.floor(plotW / 70));
    for (const { t, text } of xTicksFor(axis, x0, x1, fit)) {
      const xx = Math.round(sx(t)) + 0.5;
      grid.append(h('svg:line', { x1: xx, x2: xx, y1: MARGIN.top + plotH, y2: MARGIN.top + plotH + 4, class: 'chart-xtick' }));
      grid.append(h('svg:text', { x: xx, y: height - 6, 'text-anchor': 'middle', class: 'chart-tick' }, text));
    }
    grid.append(h('svg:line', { x1: MARGIN.left, x2: MARGIN.left + plotW, y1: MARGIN.top + plotH + 0.5, y2: MARGIN.top + plotH + 0.5, class: 'chart-axis' }));
    svg.append(grid);

    for (const s of series) {
      const pts = pointsOf(s.key);
      if (!pts.length) continue;
      const d = pts.map(([t, v], i) => `${i ? 'L' : 'M'}${sx(t).toFixed(1)},${sy(v).toFixed(1)}`).join('');
      if (area === s.key && pts.length > 1) {
        const base = sy(0).toFixed(1);
        svg.append(h('svg:path', { class: `chart-area ${s.className}`, d: `${d}L${sx(pts[pts.length - 1][0]).toFixed(1)},${base}L${sx(pts[0][0]).toFixed(1)},${base}Z` }));
      }
      svg.append(h('svg:path', { class: `chart-line ${s.className}`, d, 'data-series': s.key, 'data-points': pts.length }));
      const [lt, lv] = pts[pts.length - 1];
      svg.append(h('svg:circle', { class: `chart-dot ${s.className}`, cx: sx(lt).toFixed(1), cy: sy(lv).toFixed(1), r: 3 }));
    }

    const first = pointsOf(series[0].key);
    if (cursor !== null && first.length) {
      const i = Math.min(cursor, first.length - 1);
      const xx = Math.round(sx(first[i][0])) + 0.5;
      svg.append(h('svg:line', { class: 'chart-cursor', x1: xx, x2: xx, y1: MARGIN.top, y2: MARGIN.top + plotH }));
    }
    showReadout();
  }

  function nearestIndex(clientX) {
    const first = pointsOf(series[0].key);
    if (!first.length || !state) return null;
    const rect = svg.getBoundingClientRect();
    const plotW = Math.max(10, width - MARGIN.left - MARGIN.right);
    const t = state.x0 + ((clientX - rect.left - MARGIN.left) / plotW) * (state.x1 - state.x0);
    let best = 0;
    first.forEach(([pt], i) => {
      if (Math.abs(pt - t) < Math.abs(first[best][0] - t)) best = i;
    });
    return best;
  }

  frame.addEventListener('pointermove', (e) => {
    cursor = nearestIndex(e.clientX);
    render();
  });
  frame.addEventListener('pointerleave', () => {
    cursor = null;
    render();
  });
  frame.addEventListener('blur', () => {
    cursor = null;
    render();
  });
  frame.addEventListener('keydown', (e) => {
    const n = pointsOf(series[0].key).length;
    if (!n) return;
    if (e.key === 'ArrowLeft') cursor = Math.max(0, (cursor === null ? n - 1 : cursor) - 1);
    else if (e.key === 'ArrowRight') cursor = cursor === null ? null : cursor + 1 >= n ? null : cursor + 1;
    else if (e.key === 'Home') cursor = 0;
    else if (e.key === 'End' || e.key === 'Escape') cursor = null;
    else return;
    e.preventDefault();
    render();
  });

  let observer = null;
  if (typeof ResizeObserver !== 'undefined') {
    observer = new ResizeObserver(() => {
      if (frame.clientWidth && frame.clientWidth !== width) render();
    });
    observer.observe(frame);
  }

  return {
    el,
    update(next) {
      state = next;
      render();
    },
    destroy() {
      if (observer) observer.disconnect();
    },
  };
}
