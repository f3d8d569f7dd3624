"""The script and style the circuit view (`interp.figures.circuit_view`) inlines: plain SVG drawn from the JSON
the page embeds, every text set through ``textContent`` (a label is never parsed as markup)."""

from __future__ import annotations

from interp.figures.style import FONT, OKABE_ITO

SCRIPT = r"""
(() => {
  const NS = 'http://www.w3.org/2000/svg';
  const data = JSON.parse(document.getElementById('circuit-data').textContent);
  const E = data.edges;
  const BOX_H = 20;
  const el = (name, attrs, parent, text) => {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  };
  const known = v => v !== null && v !== undefined;
  const num = v => !known(v) ? '\u2013' : (Math.abs(v) >= 0.001 || v === 0 ? (+v).toFixed(3) : (+v).toExponential(2));
  const pct = v => !known(v) ? '\u2013' : (100 * v).toFixed(1).replace(/^-0\.0$/, '0.0') + '%';
  const section = document.getElementById('circuit');
  const svg = section.querySelector('svg.graph');
  const slider = section.querySelector('input.stop');
  const where = section.querySelector('.stop-label');
  const faith = section.querySelector('.faithfulness');
  const body = section.querySelector('table.edge-list tbody');
  const listNote = section.querySelector('.edge-list-note');

  const curve = section.querySelector('svg.curve');
  const grid = data.stops.filter(s => s.kind === 'grid');
  const [cw, ch, pad] = [300, 140, 34];
  const lx = s => Math.log10(1 + s.edges);
  const hi = Math.max(1, ...data.stops.map(lx));
  const cx = s => pad + (cw - pad - 8) * lx(s) / hi;
  const cy = v => ch - pad + 6 - (ch - pad - 6) * (Math.max(-0.2, Math.min(1.2, v || 0)) + 0.2) / 1.4;
  curve.setAttribute('viewBox', `0 0 ${cw} ${ch}`);
  el('line', {x1: pad, x2: cw - 8, y1: cy(0), y2: cy(0), class: 'axis'}, curve);
  el('line', {x1: pad, x2: pad, y1: cy(1.2), y2: cy(-0.2), class: 'axis'}, curve);
  for (const v of [0, 1]) el('text', {x: pad - 4, y: cy(v) + 4, class: 'tick', 'text-anchor': 'end'}, curve, String(v));
  el('text', {x: (cw + pad) / 2, y: ch - 6, class: 'tick', 'text-anchor': 'middle'}, curve, 'edges kept (log scale)');
  const line = key => grid.filter(s => known(s[key])).map(s => `${cx(s)},${cy(s[key])}`).join(' ');
  el('polyline', {points: line('random_recovered'), class: 'random'}, curve);
  el('polyline', {points: line('recovered'), class: 'recovered'}, curve);
  const marker = el('circle', {r: 4.5, class: 'marker'}, curve);
  el('title', {}, curve, 'share of the gap recovered at each grid point (solid) and by random circuits of that size (dashed)');

  const defs = el('defs', {}, svg);
  for (const [name, [colour]] of Object.entries(data.channels)) {
    const m = el('marker', {id: 'arrow-' + name, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6,
      orient: 'auto-start-reverse', markerUnits: 'userSpaceOnUse'}, defs);
    el('path', {d: 'M0,0 L10,5 L0,10 z', fill: colour}, m);
  }
  const axes = el('g', {class: 'axes'}, svg), edgeLayer = el('g', {class: 'edges'}, svg);
  const labelLayer = el('g', {class: 'read-labels'}, svg), nodeLayer = el('g', {class: 'nodes'}, svg);

  const curvePoints = (a, b, bend, half) => {
    const [dx, dy] = [b[0] - a[0], b[1] - a[1]];
    const c = [(a[0] + b[0]) / 2 + bend * dy, (a[1] + b[1]) / 2 - bend * dx];
    const pts = [];
    for (let i = 0; i <= 48; i++) {
      const t = i / 48, u = 1 - t;
      pts.push([u * u * a[0] + 2 * u * t * c[0] + t * t * b[0], u * u * a[1] + 2 * u * t * c[1] + t * t * b[1]]);
    }
    const inside = (p, q) => Math.abs(p[0] - q[0]) <= half && Math.abs(p[1] - q[1]) <= BOX_H / 2;
    const kept = pts.filter(p => !inside(p, a) && !inside(p, b));
    return [kept.length >= 2 ? kept : pts, pts[24]];
  };

  const draw = () => {
    const stop = data.stops[+slider.value];
    const ids = stop.draw === 'circuit' ? data.circuit : stop.draw === 'ranking' ? data.ranking.slice(0, stop.edges) : [];
    const lay = stop.layout === null ? null : data.layouts[stop.layout];
    for (const g of [axes, edgeLayer, labelLayer, nodeLayer]) g.replaceChildren();
    if (lay) {
      svg.setAttribute('viewBox', `0 0 ${lay.width} ${lay.height}`);
      svg.setAttribute('width', lay.width);
      svg.setAttribute('height', lay.height);
      for (const [y, text] of lay.rows) el('text', {x: 6, y: y + 4, class: 'row-label'}, axes, text);
      for (const [x, text] of lay.columns) el('text', {x: x, y: lay.height - 8, class: 'column-label'}, axes, 'role ' + text);
      const at = new Map(lay.nodes.map((n, i) => [n, [lay.x[i], lay.y[i]]]));
      const weight = i => Math.abs((stop.draw === 'circuit' && known(E.loss[i]) ? E.loss[i] : E.score[i]) || 0);
      const scale = Math.max(1e-12, ...ids.map(weight));
      ids.forEach((i, n) => {
        const [colour, dash] = data.channels[E.channel[i]];
        const segs = E.segments[i];
        for (let s = 0; s < segs.length; s += 2) {
          const a = at.get(segs[s]), b = at.get(segs[s + 1]);
          const bend = a[0] === b[0] ? (n % 2 ? 0.1 : -0.1) : 0.06;
          const [pts, middle] = curvePoints(a, b, bend, lay.box / 2);
          const path = el('path', {d: 'M' + pts.map(p => p[0].toFixed(1) + ',' + p[1].toFixed(1)).join(' L'),
            class: 'edge', stroke: colour, 'stroke-width': (0.8 + 4.2 * weight(i) / scale).toFixed(2),
            'stroke-dasharray': dash === 'dash' ? '6 4' : 'none', 'marker-end': `url(#arrow-${E.channel[i]})`}, edgeLayer);
          el('title', {}, path, [E.label[i], `score ${num(E.score[i])}; loss without it ${num(E.loss[i])}; ` +
            `rank value ${num(E.rank_value[i])}; exact ${num(E.exact[i])}`].join('\n'));
          if (E.key_role[i] && ids.length <= 150)
            el('text', {x: middle[0], y: middle[1] + 4, class: 'read-label', fill: colour}, labelLayer, E.key_role[i]);
        }
      });
      lay.nodes.forEach((n, i) => {
        const g = el('g', {class: 'node'}, nodeLayer);
        el('rect', {x: lay.x[i] - lay.box / 2, y: lay.y[i] - BOX_H / 2, width: lay.box, height: BOX_H, rx: 3}, g);
        el('text', {x: lay.x[i], y: lay.y[i] + 4, class: 'node-label'}, g, data.nodes[n]);
      });
    } else {
      svg.setAttribute('viewBox', '0 0 600 60');
      svg.setAttribute('width', 600);
      svg.setAttribute('height', 60);
      el('text', {x: 10, y: 34, class: 'row-label'}, axes,
         `Not drawn: the published ranking holds its top ${data.ranking.length} edges.`);
    }
    body.replaceChildren();
    ids.forEach((i, n) => {
      const tr = document.createElement('tr');
      for (const text of [String(n + 1), E.label[i], num(E.loss[i]), num(E.score[i])]) {
        const td = document.createElement('td');
        td.textContent = text;
        tr.appendChild(td);
      }
      body.appendChild(tr);
    });
    listNote.textContent = ids.length ? `${ids.length} edges` : 'no edges drawn at this point';
    where.textContent = (stop.kind === 'circuit' ? 'selected circuit: ' : `grid point ${pct(stop.fraction)} of the graph: `) +
      `${stop.edges.toLocaleString('en')} edges` + (stop.draw ? '' : ' (numbers only)');
    faith.textContent = `recovers ${pct(stop.recovered)} of the gap; accuracy ${pct(stop.accuracy)}` +
      (known(stop.random_recovered) ? `; a random circuit of this size: ${pct(stop.random_recovered)}, ` +
        `accuracy ${pct(stop.random_accuracy)}` : '');
    faith.dataset.recovered = stop.recovered;
    section.dataset.edges = ids.length;
    section.dataset.stop = slider.value;
    marker.setAttribute('cx', cx(stop));
    marker.setAttribute('cy', cy(stop.recovered));
  };
  slider.max = data.stops.length - 1;
  slider.value = data.initial;
  slider.addEventListener('input', draw);
  draw();
})();
"""

STYLE = f"""
body {{ font-family: {FONT}; margin: 16px; color: #222; }}
.controls {{ display: flex; gap: 14px; align-items: center; flex-wrap: wrap; margin: 8px 0; }}
input.stop {{ width: 340px; }}
.faithfulness {{ font-weight: bold; }}
.panes {{ display: flex; gap: 16px; align-items: flex-start; }}
.scroll {{ overflow: auto; border: 1px solid #ddd; flex: 1 1 auto; max-height: 88vh; }}
.edge-pane {{ flex: 0 0 430px; max-height: 88vh; overflow: auto; border: 1px solid #ddd; font-size: 12px; }}
table.edge-list {{ border-collapse: collapse; width: 100%; }}
table.edge-list th, table.edge-list td {{ padding: 2px 6px; border-bottom: 1px solid #eee; text-align: left; }}
table.edge-list th {{ position: sticky; top: 0; background: #fafafa; }}
.row-label {{ font-size: 12px; fill: #444; }}
.column-label {{ font-size: 12px; fill: #444; text-anchor: middle; }}
.read-label {{ font-size: 11px; text-anchor: middle; paint-order: stroke; stroke: #fff; stroke-width: 3px; }}
path.edge {{ fill: none; stroke-opacity: 0.8; }}
path.edge:hover {{ stroke-opacity: 1; }}
g.node rect {{ fill: #fff; stroke: #333; stroke-width: 1; }}
.node-label {{ font-size: 11px; text-anchor: middle; fill: #111; }}
svg.curve {{ width: 300px; height: 140px; }}
svg.curve .axis {{ stroke: #888; }}
svg.curve .tick {{ font-size: 10px; fill: #555; }}
svg.curve polyline {{ fill: none; stroke-width: 1.8; }}
svg.curve .recovered {{ stroke: {OKABE_ITO["blue"]}; }}
svg.curve .random {{ stroke: {OKABE_ITO["grey"]}; stroke-dasharray: 4 3; }}
svg.curve .marker {{ fill: {OKABE_ITO["vermillion"]}; }}
.legend span {{ display: inline-block; margin-right: 12px; font-size: 13px; }}
.legend i {{ display: inline-block; width: 18px; height: 0; border-top-width: 3px; margin-right: 4px; vertical-align: middle; }}
"""
