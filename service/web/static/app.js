// kvplan's self-service page: fill the form, ask POST v1/plans, show the plan, the pictures
// (v1/pictures/...), the explanation, a link to the question and the plan as CSV; or, in the
// traffic mode, ask POST v1/plans for a request rate (a `workload` and p99 targets) and show
// its options priced per million tokens, and POST v1/simulations for one replica under the
// rate (or a trace file) with its percentiles and the simulation's pictures
// (v1/pictures/latency-vs-rate, .../simulation). Plain
// browser JavaScript, no build step, no library. The form is never submitted (the fields, the
// read key among them, never reach a URL): its submit event asks the API with fetch.
// Every URL is relative (the page may sit behind a path prefix), and every figure and text
// from the API goes into the page as text, never as markup.
"use strict";

const GiB = 2 ** 30;
const $ = (id) => document.getElementById(id);

class Problem extends Error {
  constructor(body, status) {
    super(body.detail || `HTTP ${status}`);
    this.field = body.field || null;
    this.status = status;
  }
}

// The read key a person typed, where kvplan asks for one (KVPLAN_READ_KEYS): sent as the
// X-API-KEY header only, never in a URL (with a key, the pictures are fetched, not <img>s).
function readKey() {
  return $("api-key").value.trim();
}

function keyed(headers) {
  return readKey() ? { ...headers, "X-API-KEY": readKey() } : headers;
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: keyed({ Accept: "application/json", ...(options.headers || {}) }),
  });
  const type = response.headers.get("content-type") || "";
  const body = type.includes("json") ? await response.json() : { detail: await response.text() };
  if (!response.ok) throw new Problem(body, response.status);
  return body;
}

// A catalog list, every page: follow `next` (a path from the root; made relative here).
async function listAll(path) {
  const items = [];
  let next = path;
  while (next) {
    const page = await api(next);
    items.push(...page.items);
    next = page.next ? page.next.replace(/^\//, "") : null;
  }
  return items;
}

function option(value, text) {
  const element = document.createElement("option");
  element.value = value;
  element.textContent = text;
  return element;
}

function integer(value) {
  return Number(value).toLocaleString("en-US");
}

// A figure of the explanation as the API gave it: integers grouped, fractions to six
// significant digits (toLocaleString's default of three fraction digits shows 0.0004 as 0).
function figure(value) {
  if (Number.isInteger(value)) return integer(value);
  return value.toLocaleString("en-US", { maximumSignificantDigits: 6 });
}

function bytes(value) {
  return `${(value / GiB).toFixed(2)} GiB`;
}

async function loadCatalog() {
  $("problem").hidden = true;
  const [models, gpus] = await Promise.all([
    listAll("v1/models?limit=500"),
    listAll("v1/gpus?limit=500"),
  ]);
  const modelSelect = $("model");
  modelSelect.replaceChildren(option("", "pick a model"));
  for (const model of models) {
    const context = model.max_position_embeddings
      ? `, ${integer(model.max_position_embeddings)} tokens`
      : "";
    modelSelect.append(option(model.slug, `${model.name} (${model.slug}${context})`));
  }
  const gpuSelect = $("gpu");
  gpuSelect.replaceChildren(option("", "any GPU in the catalog (the cheapest plan)"));
  for (const gpu of gpus) {
    const price = gpu.price_usd_per_hour == null ? "" : `, $${gpu.price_usd_per_hour}/h`;
    gpuSelect.append(option(gpu.slug, `${gpu.name}: ${bytes(gpu.memory_bytes)}${price}`));
  }
  document.body.dataset.catalog = "loaded";
}

function modelSource() {
  return document.querySelector('input[name="model-source"]:checked').value;
}

function showSource() {
  const pasted = modelSource() === "config";
  $("catalog-model").hidden = pasted;
  $("config-model").hidden = !pasted;
}

// The model as the API takes it: a slug, or {hf_config: {...}} from the pasted text.
function modelRef() {
  if (modelSource() === "catalog") {
    if (!$("model").value) throw new Problem({ detail: "pick a model", field: "model" }, 0);
    return $("model").value;
  }
  let config;
  try {
    config = JSON.parse($("hf-config").value);
  } catch (error) {
    throw new Problem({ detail: `config.json is not JSON: ${error.message}`, field: "hf_config" }, 0);
  }
  const ref = { hf_config: config };
  if ($("num-parameters").value) ref.num_parameters = Number($("num-parameters").value);
  return ref;
}

function whole(id, field) {
  const value = Number($(id).value);
  if (!Number.isInteger(value) || value < 1) {
    throw new Problem({ detail: `${field}: give a whole number of at least 1`, field }, 0);
  }
  return value;
}

function question() {
  const body = {
    model: modelRef(),
    max_model_len: whole("max-model-len", "max_model_len"),
    peak_concurrency: whole("peak-concurrency", "peak_concurrency"),
    kv_cache_dtype: $("kv-cache-dtype").value,
    engine: $("engine").value,
  };
  if ($("gpu").value) body.gpus = [$("gpu").value];
  return body;
}

function setFigure(id, value, text) {
  const element = $(id);
  element.dataset.value = value == null ? "" : String(value);
  element.textContent = text;
}

function showBest(best) {
  setFigure("result-gpu", best.gpu, `${best.gpu_name || best.gpu} (${best.gpu})`);
  setFigure("result-tensor-parallel-size", best.tensor_parallel_size, integer(best.tensor_parallel_size));
  setFigure("result-replicas", best.replicas, integer(best.replicas));
  setFigure("result-total-gpus", best.total_gpus, integer(best.total_gpus));
  setFigure("result-max-num-seqs", best.max_num_seqs, integer(best.max_num_seqs));
  setFigure("result-kv-pool", best.kv_pool_bytes, bytes(best.kv_pool_bytes));
  setFigure(
    "result-headroom",
    best.headroom_fraction,
    `${(best.headroom_fraction * 100).toFixed(1)}% of the pool`,
  );
  setFigure(
    "result-cost",
    best.cost_per_hour_usd,
    best.cost_per_hour_usd == null ? "no price known" : `$${best.cost_per_hour_usd.toFixed(2)}`,
  );
  $("result-flags").textContent = flagLines(best).join("\n");
}

// The flags to paste: one line per engine, or, for a replica across nodes, one per node
// (node rank 0 first), as the plan's node_flags give them.
function flagLines(best) {
  const nodes = best.node_flags || {};
  return Object.entries(best.engine_flags).flatMap(([engine, line]) => {
    const perNode = nodes[engine] || [];
    if (perNode.length < 2) return [`# ${engine}\n${line}`];
    return perNode.map((nodeLine, rank) => `# ${engine}, node ${rank}\n${nodeLine}`);
  });
}

// The capacity question of the recommendation, for the pictures: its layout whole, pipeline
// stages across nodes included, so a picture sizes what the plan sized.
function pictureQuestion(body, best) {
  return {
    model: body.model,
    gpu: best.gpu,
    tensor_parallel_size: best.tensor_parallel_size,
    pipeline_parallel_size: best.pipeline_parallel_size || 1,
    max_model_len: body.max_model_len,
    kv_cache_dtype: body.kv_cache_dtype,
    peak_concurrency: body.peak_concurrency,
    engine: body.engine,
  };
}

function pictureImage(kind, capacity, alt) {
  const image = document.createElement("img");
  const query = new URLSearchParams({ ...capacity, format: "svg" });
  image.src = `v1/pictures/${kind}?${query}`;
  image.alt = alt;
  image.width = 760;
  image.height = 440;
  return image;
}

// A model pasted as config.json cannot go in a URL, nor a read key (an <img> sends no header):
// POST the question, place the SVG inline.
async function pictureInline(kind, capacity) {
  const response = await fetch(`v1/pictures/${kind}`, {
    method: "POST",
    headers: keyed({ Accept: "image/svg+xml", "Content-Type": "application/json" }),
    body: JSON.stringify(capacity),
  });
  if (!response.ok) throw new Problem(await response.json(), response.status);
  const parsed = new DOMParser().parseFromString(await response.text(), "image/svg+xml");
  const svg = parsed.documentElement;
  if (svg.nodeName !== "svg") throw new Error("the picture is not SVG");
  return document.importNode(svg, true);
}

async function showPictures(body, best) {
  const capacity = pictureQuestion(body, best);
  const pictures = [
    ["memory-budget", "picture-budget", "One GPU's memory budget"],
    ["capacity-by-context", "picture-context", "Sequences that fit by context length"],
  ];
  for (const [kind, id, alt] of pictures) {
    const holder = $(id);
    if (typeof capacity.model === "string" && !readKey()) {
      holder.replaceChildren(pictureImage(kind, capacity, alt));
    } else {
      holder.replaceChildren(await pictureInline(kind, capacity));
    }
  }
}

function showAlternatives(answer) {
  const rows = answer.alternatives.slice(0, 8).map((option) => {
    const row = document.createElement("tr");
    const cells = [
      option.gpu,
      integer(option.tensor_parallel_size),
      integer(option.replicas),
      integer(option.total_gpus),
      integer(option.max_num_seqs),
      option.cost_per_hour_usd == null ? "" : option.cost_per_hour_usd.toFixed(2),
    ];
    for (const text of cells) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    return row;
  });
  $("alternatives").tBodies[0].replaceChildren(...rows);
  $("rejected").textContent = answer.rejected.length
    ? `${answer.rejected.length} candidate layouts rejected (first: ${answer.rejected[0].gpu}: ` +
      `${answer.rejected[0].reason})`
    : "";
}

function words(key) {
  return key.replaceAll("_", " ");
}

// Any JSON value as nested lists and tables, all as text.
function render(value, key = "") {
  if (Array.isArray(value)) {
    if (value.length && value.every((item) => item && typeof item === "object" && !Array.isArray(item))) {
      const columns = [...new Set(value.flatMap((item) => Object.keys(item)))];
      const table = document.createElement("table");
      const head = table.createTHead().insertRow();
      for (const column of columns) {
        const th = document.createElement("th");
        th.textContent = words(column);
        head.append(th);
      }
      const tbody = table.createTBody();
      for (const item of value) {
        const row = tbody.insertRow();
        for (const column of columns) row.insertCell().append(render(item[column], column));
      }
      return table;
    }
    const list = document.createElement("ul");
    for (const item of value) {
      const entry = document.createElement("li");
      entry.append(render(item));
      list.append(entry);
    }
    return list;
  }
  if (value && typeof value === "object") {
    const list = document.createElement("dl");
    for (const [name, item] of Object.entries(value)) {
      const term = document.createElement("dt");
      term.textContent = words(name);
      const detail = document.createElement("dd");
      detail.append(render(item, name));
      list.append(term, detail);
    }
    return list;
  }
  if (typeof value === "number" && key.endsWith("bytes") && Math.abs(value) >= GiB / 100) {
    return document.createTextNode(`${integer(value)} B (${bytes(value)})`);
  }
  if (typeof value === "number") return document.createTextNode(figure(value));
  return document.createTextNode(value == null ? "" : String(value));
}

function showExplanation(explanation) {
  const holder = $("explanation");
  holder.replaceChildren();
  if (!explanation) return;
  for (const [step, value] of Object.entries(explanation)) {
    const section = document.createElement("section");
    const title = document.createElement("h4");
    title.textContent = words(step);
    section.append(title, render(value, step));
    holder.append(section);
  }
}

function showProblem(problem) {
  if (problem.status === 401) $("key-box").open = true;
  const box = $("problem");
  box.textContent = problem.field ? `${problem.field}: ${problem.message}` : problem.message;
  box.dataset.field = problem.field || "";
  box.hidden = false;
}

// ---- the question as a link ---------------------------------------------------------------
// The link holds the question's fields under the API's names, in the fragment (#...): a
// browser never sends a fragment to a server (no access log holds it), and the read key is
// never one of them. Opening the link fills the form and asks. A plan for a peak holds
// GET v1/plans' fields; the traffic mode's link adds `traffic` (`workload` or `trace`, as
// POST v1/simulations answers it), GET v1/plans' fields of a plan for a rate (the workload as
// its JSON text, the p99 targets, disaggregated) and the simulated replica's
// tensor_parallel_size. A trace file cannot go in a link: opening a trace's link asks for it.
const MODEL_FIELDS = ["model", "hf_config", "num_parameters"];
const LINK_FIELDS = {
  plan: [...MODEL_FIELDS, "gpus", "engine", "max_model_len", "peak_concurrency", "kv_cache_dtype"],
  traffic: [
    ...MODEL_FIELDS,
    "traffic",
    "gpus",
    "engine",
    "max_model_len",
    "kv_cache_dtype",
    "workload",
    "ttft_p99_ms",
    "tpot_p99_ms",
    "disaggregated",
    "tensor_parallel_size",
  ],
};
// The workload's fields the form holds (the input named by the field, `_` as `-`).
const WORKLOAD_FIELDS = ["request_rate", "input_tokens", "output_tokens", "num_requests"];

function modelFields(model) {
  const fields = new URLSearchParams();
  if (typeof model === "string") {
    fields.set("model", model);
  } else {
    fields.set("hf_config", JSON.stringify(model.hf_config));
    if (model.num_parameters) fields.set("num_parameters", String(model.num_parameters));
  }
  return fields;
}

function linkTo(fields) {
  return `${location.origin}${location.pathname}#${fields}`;
}

function shareLink(body) {
  const fields = modelFields(body.model);
  if (body.gpus) fields.set("gpus", body.gpus.join(","));
  for (const name of ["engine", "max_model_len", "peak_concurrency", "kv_cache_dtype"]) {
    fields.set(name, String(body[name]));
  }
  return linkTo(fields);
}

// The traffic question as a link: the deployment, the workload (none for a trace), the
// targets given (a target left empty is left out: none), the split and the replica's layout.
function trafficLink(deployed, workload, targets) {
  const fields = modelFields(deployed.model);
  fields.set("traffic", workload ? "workload" : "trace");
  if ($("gpu").value) fields.set("gpus", $("gpu").value);
  for (const name of ["engine", "max_model_len", "kv_cache_dtype"]) fields.set(name, String(deployed[name]));
  if (workload) fields.set("workload", JSON.stringify(workload));
  for (const [name, value] of Object.entries(targets)) fields.set(name, String(value));
  fields.set("disaggregated", $("disaggregated").value);
  fields.set("tensor_parallel_size", String(deployed.tensor_parallel_size));
  return linkTo(fields);
}

function refuse(field, detail) {
  return new Problem({ detail, field }, 0);
}

// A select set to the link's value, or a problem naming the field when it holds no such choice.
function choose(id, value, field) {
  const select = $(id);
  select.value = value;
  if (select.value !== value) {
    throw refuse(field, `the link's ${JSON.stringify(value)} is not one of this page's choices`);
  }
}

function check(name, value) {
  document.querySelector(`input[name="${name}"][value="${value}"]`).checked = true;
}

// The form filled from the link's fields, or a problem naming the first field it cannot take.
function fillFromLink(fields) {
  const traffic = fields.has("traffic");
  const unknown = [...fields.keys()].filter((name) => !LINK_FIELDS[traffic ? "traffic" : "plan"].includes(name));
  if (unknown.length) {
    const detail = traffic
      ? `the link names fields a traffic question does not take: ${unknown.join(", ")}`
      : `the link names fields the page does not know: ${unknown.join(", ")}`;
    throw refuse(unknown[0], detail);
  }
  check("mode", traffic ? "traffic" : "plan");
  showMode();
  const pasted = fields.has("hf_config");
  check("model-source", pasted ? "config" : "catalog");
  showSource();
  if (pasted) {
    $("hf-config").value = fields.get("hf_config");
    $("num-parameters").value = fields.get("num_parameters") || "";
  } else {
    choose("model", fields.get("model") || "", "model");
  }
  choose("gpu", fields.get("gpus") || "", "gpus");
  if (fields.has("engine")) choose("engine", fields.get("engine"), "engine");
  if (fields.has("kv_cache_dtype")) choose("kv-cache-dtype", fields.get("kv_cache_dtype"), "kv_cache_dtype");
  if (fields.has("max_model_len")) $("max-model-len").value = fields.get("max_model_len");
  if (traffic) {
    fillTrafficFromLink(fields);
  } else if (fields.has("peak_concurrency")) {
    $("peak-concurrency").value = fields.get("peak_concurrency");
  }
}

// The traffic fields of a link: its kind of traffic, the workload, the targets (one the link
// leaves out is none, as the API reads it), the split and the simulated replica's layout.
function fillTrafficFromLink(fields) {
  const source = fields.get("traffic");
  if (source !== "workload" && source !== "trace") {
    throw refuse("traffic", `the link's ${JSON.stringify(source)} is neither workload nor trace`);
  }
  check("traffic-source", source === "workload" ? "rate" : "trace");
  showTrafficSource();
  if (source === "workload") {
    fillWorkload(fields.get("workload"));
  } else if (fields.has("workload")) {
    throw refuse("workload", "a trace's link holds no workload: the trace file is the traffic");
  }
  $("max-ttft-ms").value = fields.get("ttft_p99_ms") || "";
  $("max-tpot-ms").value = fields.get("tpot_p99_ms") || "";
  if (fields.has("disaggregated")) choose("disaggregated", fields.get("disaggregated"), "disaggregated");
  $("tensor-parallel-size").value = fields.get("tensor_parallel_size") || "1";
}

// The workload's JSON text into its four inputs: each a number (lengths as percentiles or a
// histogram, a duration or a closed loop are the API's, not this form's: refused by name).
function fillWorkload(text) {
  let workload;
  try {
    workload = JSON.parse(text);
  } catch (error) {
    throw refuse("workload", `the link's workload is not JSON: ${error.message}`);
  }
  if (!workload || typeof workload !== "object" || Array.isArray(workload)) {
    throw refuse("workload", "the link's workload is not a JSON object");
  }
  for (const name of Object.keys(workload)) {
    if (!WORKLOAD_FIELDS.includes(name)) {
      throw refuse(`workload.${name}`, `the page's form takes only ${WORKLOAD_FIELDS.join(", ")}`);
    }
  }
  for (const name of WORKLOAD_FIELDS) {
    if (typeof workload[name] !== "number") {
      throw refuse(`workload.${name}`, "the link's workload gives no number for it");
    }
    $(name.replaceAll("_", "-")).value = String(workload[name]);
  }
}

// The link the page was opened with (or moved to), asked once the catalog is in the lists.
let linkAsked = "";

function askTheLink() {
  const fields = new URLSearchParams(location.hash.slice(1));
  if (location.hash === linkAsked || ![...fields.keys()].length) return;
  linkAsked = location.hash;
  fillFromLink(fields);
  if (fields.get("traffic") === "trace") {
    throw refuse("trace", "a trace file cannot go in a link: choose it again, then Plan and simulate");
  }
  $("question").requestSubmit();
}

function openPage() {
  loadCatalog().then(askTheLink).catch(showProblem);
}

// The same plan as the API's CSV (one row per option, as POST v1/plans answers
// `Accept: text/csv`), as a file to download.
async function csvLink(body) {
  const response = await fetch("v1/plans", {
    method: "POST",
    headers: keyed({ Accept: "text/csv", "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Problem(await response.json(), response.status);
  return `data:text/csv;charset=utf-8,${encodeURIComponent(await response.text())}`;
}

async function plan(event) {
  event.preventDefault();
  $("problem").hidden = true;
  const result = $("result");
  result.dataset.state = "asking";
  $("status").textContent = "Planning...";
  $("submit").disabled = true;
  try {
    const body = question();
    const answer = await api("v1/plans", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...body, explain: true }),
    });
    const best = answer.recommendation;
    $("traffic-result").hidden = true;
    result.hidden = false;
    $("result-best").hidden = !best;
    $("result-none").hidden = Boolean(best);
    $("result-none").textContent = best ? "" : "No GPU in the search holds this: see the rejected layouts.";
    // a fact every option carries is the plan's too: said once
    const warnings = [...new Set([...answer.warnings, ...(best ? best.warnings : [])])];
    $("result-warnings").replaceChildren(
      ...warnings.map((text) => {
        const item = document.createElement("li");
        item.textContent = text;
        return item;
      }),
    );
    showAlternatives(answer);
    showExplanation(answer.explanation);
    $("share-link").href = shareLink(body);
    $("csv-link").href = await csvLink(body);
    if (best) {
      showBest(best);
      await showPictures(body, best);
    }
    result.dataset.state = "ready";
    $("status").textContent = "";
  } catch (error) {
    result.dataset.state = "problem";
    $("status").textContent = "";
    showProblem(error);
  } finally {
    $("submit").disabled = false;
  }
}

// ---- the traffic mode ------------------------------------------------------------------------
// A request rate and lengths (or a trace file) and p99 targets. With a rate and a target, the
// plan for the rate: POST v1/plans with the `workload` and the targets (the GPU picked, or the
// whole catalog), each option as the API priced it (cost per million output and input tokens,
// simulated p99s, both pools of a disaggregated option). With a GPU picked, one replica of it
// under the whole rate: POST v1/simulations (vLLM's V1 scheduler or SGLang's stepped, each
// step timed by the speed model), its percentiles, and two pictures: latency against request
// rate (the same workload at rates around the one asked, to saturation) and the run at the
// rate asked over time. A trace file is posted as the body (text/csv, or Mooncake's JSON
// lines) with the deployment in the query string, as the API takes a trace.

// The rates the latency picture simulates: a quarter of the rate asked to three times it.
const SWEEP = [0.25, 0.5, 1, 1.5, 2, 3];

function mode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

function trafficSource() {
  return document.querySelector('input[name="traffic-source"]:checked').value;
}

function showMode() {
  const traffic = mode() === "traffic";
  $("traffic-fields").hidden = !traffic;
  $("peak-box").hidden = traffic;
  $("submit").textContent = traffic ? "Plan and simulate" : "Plan";
  $("result").hidden = traffic || $("result").dataset.state === undefined;
  $("traffic-result").hidden = !traffic || $("traffic-result").dataset.state === undefined;
}

function showTrafficSource() {
  const trace = trafficSource() === "trace";
  $("rate-box").hidden = trace;
  $("trace-box").hidden = !trace;
}

function positive(id, field) {
  const value = Number($(id).value);
  if (!$(id).value || !(value > 0)) {
    throw new Problem({ detail: `${field}: give a number above 0`, field }, 0);
  }
  return value;
}

// The deployment of one replica, as POST v1/simulations takes it (less the GPU).
function deployment() {
  return {
    model: modelRef(),
    tensor_parallel_size: whole("tensor-parallel-size", "tensor_parallel_size"),
    max_model_len: whole("max-model-len", "max_model_len"),
    kv_cache_dtype: $("kv-cache-dtype").value,
    engine: $("engine").value,
  };
}

function workloadIn() {
  return {
    request_rate: positive("request-rate", "workload.request_rate"),
    input_tokens: whole("input-tokens", "workload.input_tokens"),
    output_tokens: whole("output-tokens", "workload.output_tokens"),
    num_requests: whole("num-requests", "workload.num_requests"),
  };
}

// The p99 targets given (either may be empty): the plan's ttft_p99_ms and tpot_p99_ms, and
// the simulation's goodput targets (a request within both is good).
function targetsIn() {
  const targets = {};
  if ($("max-ttft-ms").value) targets.ttft_p99_ms = positive("max-ttft-ms", "ttft_p99_ms");
  if ($("max-tpot-ms").value) targets.tpot_p99_ms = positive("max-tpot-ms", "tpot_p99_ms");
  return targets;
}

function goodputTargets(targets) {
  const goodput = {};
  if (targets.ttft_p99_ms) goodput.max_ttft_ms = targets.ttft_p99_ms;
  if (targets.tpot_p99_ms) goodput.max_tpot_ms = targets.tpot_p99_ms;
  return goodput;
}

// What the traffic mode asks, or a problem naming the field when it can ask nothing.
function trafficAsks() {
  const rate = trafficSource() === "rate";
  const targets = targetsIn();
  const plans = rate && Object.keys(targets).length > 0;
  if (!$("gpu").value && !plans) {
    const detail = rate
      ? "give a p99 target to plan for the rate, or pick a GPU to simulate one replica"
      : "a trace file is simulated on one replica: pick a GPU";
    throw new Problem({ detail, field: "gpu" }, 0);
  }
  return { rate, targets, plans, simulates: Boolean($("gpu").value) };
}

// ---- the plan for a rate

function planForRateBody(deployed, workload, targets) {
  const body = {
    model: deployed.model,
    max_model_len: deployed.max_model_len,
    kv_cache_dtype: deployed.kv_cache_dtype,
    engine: deployed.engine,
    workload,
    ...targets,
    disaggregated: $("disaggregated").value,
    explain: false,
  };
  if ($("gpu").value) body.gpus = [$("gpu").value];
  return body;
}

function money(value) {
  return value == null ? "no price known" : `$${value.toLocaleString("en-US", { maximumFractionDigits: 4 })}`;
}

// A cell holding a value of the option (data-field, data-value) and the text shown for it.
function cell(row, field, value, lines) {
  const element = row.insertCell();
  element.dataset.field = field;
  element.dataset.value = value == null ? "" : String(value);
  for (const [index, line] of lines.entries()) {
    if (index) element.append(document.createElement("br"));
    element.append(document.createTextNode(line));
  }
  return element;
}

// A disaggregated option's value per pool ("prefill ...", "decode ..."); one pool's own.
function perPool(option, field, text) {
  const split = option.disaggregated;
  if (!split) return [text(option[field])];
  return [`prefill ${text(split.prefill_pool[field])}`, `decode ${text(split.decode_pool[field])}`];
}

// The flags to paste: one pool's per engine (per node across nodes); a split option's two
// pools' and the router in front of them.
function optionFlags(option) {
  const split = option.disaggregated;
  if (!split) return flagLines(option);
  const lines = [];
  for (const [role, pool] of [["prefill", split.prefill_pool], ["decode", split.decode_pool]]) {
    for (const [engine, line] of Object.entries(pool.engine_flags)) {
      lines.push(`# ${role} pool: ${pool.replicas} x ${pool.gpu} TP${pool.tensor_parallel_size}, ${engine}\n${line}`);
    }
  }
  for (const [engine, line] of Object.entries(split.router)) lines.push(`# router, ${engine}\n${line}`);
  return lines;
}

function flagsCell(row, option) {
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = option.disaggregated ? "both pools' flags" : "flags";
  const pre = document.createElement("pre");
  pre.textContent = optionFlags(option).join("\n");
  details.append(summary, pre);
  row.insertCell().append(details);
}

function optionRow(option, rank) {
  const row = document.createElement("tr");
  row.dataset.kind = option.kind;
  row.dataset.rank = String(rank);
  cell(row, "kind", option.kind, [rank === 0 ? `${option.kind} (recommended)` : option.kind]);
  cell(row, "gpu", option.gpu, perPool(option, "gpu", String));
  cell(row, "tensor_parallel_size", option.tensor_parallel_size, perPool(option, "tensor_parallel_size", integer));
  cell(row, "replicas", option.replicas, perPool(option, "replicas", integer));
  cell(row, "total_gpus", option.total_gpus, [integer(option.total_gpus)]);
  const hourly = option.cost_per_hour_usd;
  cell(row, "cost_per_hour_usd", hourly, [hourly == null ? "no price known" : `$${hourly.toFixed(2)}`]);
  for (const field of ["cost_per_million_output_tokens_usd", "cost_per_million_input_tokens_usd"]) {
    cell(row, field, option[field], [money(option[field])]);
  }
  for (const field of ["ttft_ms", "tpot_ms"]) {
    const p99 = option[field] ? option[field].p99 : null;
    cell(row, `${field}.p99`, p99, [milliseconds(p99)]);
  }
  flagsCell(row, option);
  return row;
}

function listItems(texts) {
  return texts.map((text) => {
    const item = document.createElement("li");
    item.textContent = text;
    return item;
  });
}

function showRatePlan(answer) {
  const options = answer.recommendation ? [answer.recommendation, ...answer.alternatives] : [];
  $("rate-options").tBodies[0].replaceChildren(...options.map(optionRow));
  $("rate-plan-summary").textContent = options.length
    ? `${answer.model} at ${figure(answer.request_rate)} requests per second: ${options.length} ` +
      `options (${integer(answer.alternatives_omitted)} more not shown)`
    : `No GPU in the search serves ${figure(answer.request_rate)} requests per second within ` +
      "the targets: see the rejected layouts.";
  const split = answer.disaggregation;
  $("rate-disaggregation").textContent = split ? split.statement : "";
  $("rate-disaggregation").dataset.cheaperFraction = split && split.cheaper_fraction != null ? String(split.cheaper_fraction) : "";
  const best = answer.recommendation;
  const warnings = [...new Set([...answer.warnings, ...(best ? best.warnings : [])])];
  $("rate-warnings").replaceChildren(...listItems(warnings.filter((text) => !split || text !== split.statement)));
  const rejected = answer.rejected;
  $("rate-rejected").dataset.value = String(rejected.length);
  $("rate-rejected").textContent = rejected.length
    ? `${integer(rejected.length)} candidate layouts rejected (first: ${rejected[0].gpu}: ${rejected[0].reason})`
    : "No candidate layout rejected.";
  $("rate-plan").hidden = false;
}

async function planForRate(deployed, workload, targets) {
  $("status").textContent = "Planning for the rate...";
  const answer = await api("v1/plans", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(planForRateBody(deployed, workload, targets)),
  });
  showRatePlan(answer);
}

// ---- one replica simulated

function milliseconds(value) {
  return value == null ? "-" : value.toLocaleString("en-US", { maximumFractionDigits: 1, minimumFractionDigits: 1 });
}

function showLatencies(answer) {
  const rows = [
    ["time to first token (TTFT)", "ttft_ms"],
    ["time per output token (TPOT)", "tpot_ms"],
    ["end to end", "e2e_latency_ms"],
    ["queue", "queue_time_ms"],
  ].map(([title, field]) => {
    const row = document.createElement("tr");
    row.dataset.field = field;
    const head = document.createElement("th");
    head.textContent = title;
    row.append(head);
    for (const stat of ["mean", "p50", "p90", "p99"]) {
      const cell = row.insertCell();
      cell.dataset.stat = stat;
      cell.dataset.value = answer[field][stat] == null ? "" : String(answer[field][stat]);
      cell.textContent = milliseconds(answer[field][stat]);
    }
    return row;
  });
  $("traffic-latency").tBodies[0].replaceChildren(...rows);
}

function engineLine(answer) {
  const engine = answer.engine;
  const source = answer.traffic === "trace" ? `${answer.trace_format} trace, ` : "";
  return (
    `${answer.model} on ${answer.gpu}, ${source}${integer(answer.completed_requests)} requests in ` +
    `${figure(answer.duration_s)} s simulated, ${integer(answer.steps)} engine steps; ` +
    (engine.engine === "sglang"
      ? `SGLang's scheduler: ${integer(engine.max_total_num_tokens)} KV tokens ` +
        `(${integer(engine.num_gpu_blocks)} blocks of ${engine.block_size}), ` +
        `max_running_requests ${integer(engine.max_num_seqs)}, ` +
        `chunked_prefill_size ${integer(engine.chunked_prefill_size)}`
      : `vLLM's scheduler: ${integer(engine.num_gpu_blocks)} KV blocks of ` +
        `${engine.block_size} tokens, max_num_seqs ${integer(engine.max_num_seqs)}, ` +
        `max_num_batched_tokens ${integer(engine.max_num_batched_tokens)}`)
  );
}

function showSimulation(answer) {
  showLatencies(answer);
  $("traffic-engine").textContent = engineLine(answer);
  const throughput = answer.throughput;
  setFigure(
    "traffic-requests-per-second",
    throughput.requests_per_second,
    throughput.requests_per_second.toFixed(2),
  );
  setFigure(
    "traffic-output-tokens-per-second",
    throughput.output_tokens_per_second,
    integer(Math.round(throughput.output_tokens_per_second)),
  );
  const goodput = answer.goodput;
  setFigure(
    "traffic-goodput",
    goodput ? goodput.fraction : null,
    goodput ? `${(goodput.fraction * 100).toFixed(1)}% of requests` : "no targets given",
  );
  setFigure("traffic-mean-running", answer.mean_running, answer.mean_running.toFixed(1));
  setFigure("traffic-peak-kv-usage", answer.peak_kv_usage, `${(answer.peak_kv_usage * 100).toFixed(1)}% of the pool`);
  setFigure("traffic-preemptions", answer.preemptions, integer(answer.preemptions));
  $("traffic-warnings").replaceChildren(...listItems(answer.warnings));
  $("replica").hidden = false;
}

async function simulateRate(deployed, workload, targets) {
  $("status").textContent = "Simulating one replica...";
  const body = { ...deployed, gpu: $("gpu").value, workload };
  if (Object.keys(targets).length) body.targets = targets;
  const answer = await api("v1/simulations", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  showSimulation(answer);
  $("status").textContent = "Drawing latency against request rate...";
  const sweep = { ...body, request_rates: SWEEP.map((share) => share * workload.request_rate) };
  $("picture-latency").replaceChildren(await pictureInline("latency-vs-rate", sweep));
  $("picture-simulation").replaceChildren(await pictureInline("simulation", body));
  $("traffic-pictures").hidden = false;
}

// A trace file as POST v1/simulations takes one: the file as the body, in its own media type,
// and the deployment in the query string (a catalog model's slug: a config.json fits no URL).
async function simulateTrace(deployed, targets) {
  const file = $("trace-file").files[0];
  if (!file) throw new Problem({ detail: "choose a trace file", field: "trace" }, 0);
  if (typeof deployed.model !== "string") {
    throw new Problem(
      { detail: "a trace file is simulated with the deployment in the query string: pick a catalog model", field: "model" },
      0,
    );
  }
  $("status").textContent = "Simulating the trace on one replica...";
  const query = new URLSearchParams({ ...deployed, gpu: $("gpu").value, ...targets });
  const media = /\.jsonl?$/i.test(file.name) ? "application/jsonl" : "text/csv";
  const answer = await api(`v1/simulations?${query}`, {
    method: "POST",
    headers: { "Content-Type": media },
    body: await file.text(),
  });
  showSimulation(answer);
  $("traffic-pictures").hidden = true;
  $("traffic-pictures-none").hidden = false;
  $("traffic-pictures-none").textContent =
    "The pictures are drawn for a request rate: a trace file's run is shown as figures only.";
}

function resetTraffic(asks) {
  for (const id of ["rate-plan", "replica", "traffic-pictures-none"]) $(id).hidden = true;
  $("rate-plan-none").hidden = asks.plans;
  $("rate-plan-none").textContent = asks.plans
    ? ""
    : asks.rate
      ? "No plan: give a p99 target (time to first token or per output token) to plan for the rate."
      : "No plan: POST v1/plans plans for a request rate and lengths, not a trace file.";
}

async function traffic() {
  const result = $("traffic-result");
  result.dataset.state = "asking";
  const asks = trafficAsks();
  const deployed = deployment();
  const workload = asks.rate ? workloadIn() : null;
  resetTraffic(asks);
  $("traffic-share-link").href = trafficLink(deployed, workload, asks.targets);
  $("share-trace").hidden = asks.rate;
  result.hidden = false;
  if (asks.plans) await planForRate(deployed, workload, asks.targets);
  if (asks.simulates && asks.rate) await simulateRate(deployed, workload, goodputTargets(asks.targets));
  if (asks.simulates && !asks.rate) await simulateTrace(deployed, goodputTargets(asks.targets));
  result.dataset.state = "ready";
  $("status").textContent = "";
}

async function ask(event) {
  if (mode() !== "traffic") {
    await plan(event);
    return;
  }
  event.preventDefault();
  $("problem").hidden = true;
  $("result").hidden = true;
  $("submit").disabled = true;
  try {
    await traffic();
  } catch (error) {
    $("traffic-result").dataset.state = "problem";
    $("status").textContent = "";
    showProblem(error);
  } finally {
    $("submit").disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const radio of document.querySelectorAll('input[name="model-source"]')) {
    radio.addEventListener("change", showSource);
  }
  for (const radio of document.querySelectorAll('input[name="mode"]')) {
    radio.addEventListener("change", showMode);
  }
  for (const radio of document.querySelectorAll('input[name="traffic-source"]')) {
    radio.addEventListener("change", showTrafficSource);
  }
  $("question").addEventListener("submit", ask);
  $("api-key").addEventListener("change", openPage);
  window.addEventListener("hashchange", openPage);
  openPage();
});
