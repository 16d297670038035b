// A panel's rows as Grafana displays them, computed by Grafana's own @grafana/data (pinned in package.json).
//
// stdin: {"panel": <panel JSON>, "frames": [<frame>...], "now": <epoch ms>}, each frame shaped as Grafana's
// Prometheus data source gives an answer: one frame per series, {"refId", "name", "fields": [{"name": "Time",
// "type": "time", "values"}, {"name": "Value", "type": "number", "labels", "config", "values"}]}.
// stdout: {"header": [...], "rows": [[...]], "links": [[...]]}: a table's visible columns by their display names,
// each row's cells as displayed (unit, decimals, mappings) and its data links' URLs; a gauge's or bar gauge's
// values as [title, value] rows.
//
// The steps are Grafana's: a target of format "table" becomes one table frame (the data source's
// transformDFToTable), then the panel's transformations (transformDataFrame), its field config
// (applyFieldOverrides), and the display (getDisplayProcessor, getFieldDisplayName, getFieldDisplayValues).
'use strict';

const path = require('path');
const data = require(path.join(__dirname, 'node_modules', '@grafana', 'data'));

// transformDataFrame reads window.__grafanaSceneContext, the date formats navigator.languages (Node 20 has no
// navigator); the app registers the transformers and the field options, so this script does.
globalThis.window = globalThis.window || {};
globalThis.navigator = globalThis.navigator || { language: 'en-US', languages: ['en-US'] };
const transformers = new Map(Object.values(data.standardTransformers).map((t) => [t.id, t]));  // one per id
data.standardTransformersRegistry.setInit(() => [...transformers.values()].map((t) => ({
  id: t.id, aliasIds: t.aliasIds, name: t.name, description: t.description, editor: () => null,
  transformation: () => t,
})));

function option(id, process, extra = {}) {
  return { id, path: id, name: id, process, override: () => null, editor: () => null,
    shouldApply: () => true, ...extra };
}
const identity = (value) => value;
const fieldOptions = new data.FieldConfigOptionsRegistry(() => [
  option('unit', data.unitOverrideProcessor),
  option('decimals', data.numberOverrideProcessor),
  option('min', data.numberOverrideProcessor),
  option('max', data.numberOverrideProcessor),
  option('noValue', data.stringOverrideProcessor),
  option('displayName', data.displayNameOverrideProcessor),
  option('thresholds', data.thresholdsOverrideProcessor),
  option('mappings', data.valueMappingsOverrideProcessor),
  option('color', identity),
  option('links', identity),
  option('filterable', data.booleanOverrideProcessor),
  // A custom option's path is its place under config.custom, as the panel plugins register them.
  ...['custom.hidden', 'custom.hideFrom', 'custom.width', 'custom.cellOptions', 'custom.align', 'custom.filterable',
    'custom.inspect', 'custom.minWidth'].map((id) => option(id, identity, { isCustom: true, path: id.slice(7) })),
]);

function prometheusTable(frames) {
  // @grafana/prometheus's transformDFToTable: per refId a Time column, the labels (each frame's sorted, in
  // the order first seen), and `Value` (`Value #<refId>` when several refIds make tables).
  if (frames.length === 1 && !frames[0].fields.length) return frames;
  const byRef = new Map();
  for (const frame of frames) {
    if (!byRef.has(frame.refId)) byRef.set(frame.refId, []);
    byRef.get(frame.refId).push(frame);
  }
  return [...byRef.entries()].map(([refId, group]) => {
    const labels = [];
    for (const frame of group) {
      for (const name of Object.keys((frame.fields[1] && frame.fields[1].labels) || {}).sort()) {
        if (!labels.includes(name)) labels.push(name);
      }
    }
    const time = { name: 'Time', type: 'time', config: {}, values: [] };
    const value = { name: byRef.size > 1 ? `Value #${refId}` : 'Value', type: 'number', config: {}, values: [] };
    const labelFields = labels.map((name) => ({ name, type: name === 'le' ? 'number' : 'string',
      config: { filterable: true }, values: [] }));
    for (const frame of group.filter((f) => f.fields.length)) {
      const own = frame.fields[1].labels || {};
      frame.fields[0].values.forEach((t) => time.values.push(t));
      frame.fields[1].values.forEach((v) => {
        value.values.push(v);
        labelFields.forEach((f) => f.values.push(own[f.name] ?? ''));
      });
    }
    return { refId, fields: [time, ...labelFields, value], length: time.values.length,
      meta: { preferredVisualisationType: 'rawPrometheus' } };
  });
}

function framed(panel, frames) {
  const tableRefs = new Set((panel.targets || []).filter((t) => t.format === 'table').map((t) => t.refId));
  const tables = prometheusTable(frames.filter((f) => tableRefs.has(f.refId)));
  const series = frames.filter((f) => !tableRefs.has(f.refId)).map((f) => data.toDataFrame(f));
  return [...series, ...tables.map((f) => data.toDataFrame(f))];
}

async function transformed(panel, frames) {
  const steps = panel.transformations || [];
  const out = await new Promise((resolve, reject) => {
    data.transformDataFrame(steps, frames).subscribe({ next: resolve, error: reject });
  });
  return out;
}

// Grafana's template service fills `${__data.fields.<name>}` with that field's displayed value on the row
// (public/app/features/templating/dataMacros.ts), percent-encoded under `:percentencode` (a data link's URL is
// encoded by default); nothing else is a variable here.
function replaceVariables(text, scopedVars, format) {
  const context = scopedVars && scopedVars.__dataContext;
  if (!context || typeof text !== 'string') return text;
  const { frame, rowIndex } = context.value;
  const fields = data.getFieldDisplayValuesProxy({ frame, rowIndex });
  return text.replace(/\$\{__data\.fields\.([\w.]+)(?::(\w+))?\}/g, (_, name, own) => {
    const value = fields[name];
    const shown = value === undefined ? '' : String(value);
    return ['percentencode', 'uriencode'].includes(own || format) ? encodeURIComponent(shown) : shown;
  });
}

function display(panel, frames, now) {
  const theme = data.createTheme();
  const fieldConfig = panel.fieldConfig || { defaults: {}, overrides: [] };
  const shown = data.applyFieldOverrides({ data: frames, fieldConfig, fieldConfigRegistry: fieldOptions,
    replaceVariables, theme, timeZone: 'utc' });
  if (panel.type === 'table') {
    const frame = shown[0];
    if (!frame) return { header: [], rows: [] };
    // TableNG (12.2+) hides a field by custom.hideFrom.viz (the table migration moves custom.hidden there).
    const hidden = (f) => f.config.custom && (f.config.custom.hidden || (f.config.custom.hideFrom || {}).viz);
    const fields = frame.fields.filter((f) => !hidden(f));
    const header = fields.map((f) => data.getFieldDisplayName(f, frame, shown));
    const rows = [];
    for (let i = 0; i < frame.length; i++) {
      rows.push(fields.map((f) => {
        const processor = f.display || data.getDisplayProcessor({ field: f, theme, timeZone: 'utc' });
        return data.formattedValueToString(processor(f.values[i]));
      }));
    }
    // Each row's data links, as the table opens them: the href of every link of every field that has one.
    const links = [];
    for (let i = 0; i < frame.length; i++) {
      links.push(frame.fields.filter((f) => f.getLinks && (f.config.links || []).length)
        .flatMap((f) => f.getLinks({ valueRowIndex: i }).map((link) => link.href)));
    }
    return { header, rows, links };
  }
  const reduceOptions = (panel.options || {}).reduceOptions || { calcs: ['lastNotNull'], values: false };
  const values = data.getFieldDisplayValues({ data: shown, reduceOptions, fieldConfig, replaceVariables, theme,
    timeZone: 'utc' });
  return { header: ['title', 'value'],
    rows: values.map((v) => [v.display.title ?? '', data.formattedValueToString(v.display)]) };
}

async function main() {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  const input = JSON.parse(text);
  if (input.now !== undefined) Date.now = () => input.now;
  const frames = await transformed(input.panel, framed(input.panel, input.frames));
  process.stdout.write(JSON.stringify(display(input.panel, frames, input.now)) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
