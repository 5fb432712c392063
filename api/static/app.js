// Streams /v1/audio/speech as 24 kHz pcm and schedules each piece on the Web Audio clock as it
// arrives, so playback starts with the first chunk. No build step: plain browser JavaScript.
"use strict";

const RATE = 24000;
const $ = (id) => document.getElementById(id);

// The page's API key as a header, if one is typed.
function authorization() {
  return $("key").value ? { Authorization: "Bearer " + $("key").value } : {};
}

function headers() {
  return { "Content-Type": "application/json", ...authorization() };
}

// A refused request's reason: the server's error message (OpenAI's error body), else its status.
async function failure(response) {
  const error = await response.json().catch(() => ({}));
  return error.error && error.error.message ? error.error.message : "HTTP " + response.status;
}

// The options both modes send besides the voice: the language when not the model's own choice,
// instructions when the model reads them and some are typed.
function voicing() {
  const options = {};
  if ($("language").value && $("language").value !== "auto") options.language = $("language").value;
  if (!$("instructions-row").hidden && $("instructions").value.trim()) options.instructions = $("instructions").value;
  return options;
}

function body(format) {
  return JSON.stringify({
    model: "tts-1", input: $("text").value, voice: $("voice").value,
    response_format: format, speed: Number($("speed").value) || 1, ...voicing(),
  });
}

// The timestamps the served model can send ("word", or none): live mode asks for them if so.
let modelTimestamps = [];

// Replaces a select's options ([label, value] pairs) and chooses `prefer` if offered, else the
// value chosen before if still offered, else the first; a change of value fires "change".
function fill(select, options, prefer) {
  const chosen = select.value;
  select.replaceChildren(...options.map(([label, value]) => new Option(label, value)));
  const values = options.map(([, value]) => value);
  if (values.includes(prefer)) select.value = prefer;
  else if (values.includes(chosen)) select.value = chosen;
  if (select.value !== chosen) select.dispatchEvent(new Event("change"));
}

// The served model's voices, then the key's stored voices (by name, sent by id; voices.js); `pick`
// chooses one.
async function loadVoices(pick) {
  const response = await fetch("/v1/audio/voices", { headers: headers() });
  if (!response.ok) { $("status").value = "voices: " + await failure(response); return; }
  const model = (await response.json()).data[0];
  modelTimestamps = model.timestamps || [];
  const stored = model.stored || [];
  fill($("voice"), [...model.voices.map((v) => [v, v]), ...stored.map((v) => [v.name, v.id])], pick);
  fill($("language"), (model.languages || ["auto"]).map((l) => [l, l]));
  $("instructions-row").hidden = !model.instructions;
  library.show(model);
}

// pcm16 little-endian bytes → float samples; an odd trailing byte waits for the next piece.
class Pcm16Reader {
  constructor() { this.carry = new Uint8Array(0); }
  read(bytes) {
    const all = new Uint8Array(this.carry.length + bytes.length);
    all.set(this.carry); all.set(bytes, this.carry.length);
    const even = all.length - (all.length % 2);
    this.carry = all.slice(even);
    const view = new DataView(all.buffer, 0, even);
    const out = new Float32Array(even / 2);
    for (let i = 0; i < out.length; i++) out[i] = view.getInt16(2 * i, true) / 32768;
    return out;
  }
}

async function play() {
  const context = new AudioContext({ sampleRate: RATE });
  await context.resume();
  const started = performance.now();
  let playAt = context.currentTime + 0.05, chunks = 0, samples = 0;
  $("ttfa").value = "–"; $("chunks").value = "0"; $("seconds").value = "0.00"; $("status").value = "requesting";
  const response = await fetch("/v1/audio/speech", { method: "POST", headers: headers(), body: body("pcm") });
  if (!response.ok) { $("status").value = "error: " + await failure(response); return; }
  const reader = response.body.getReader(), pcm = new Pcm16Reader();
  $("status").value = "streaming";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const floats = pcm.read(value);
    if (!floats.length) continue;
    if (chunks === 0) $("ttfa").value = ((performance.now() - started) / 1000).toFixed(3) + " s";
    chunks += 1; samples += floats.length;
    $("chunks").value = String(chunks); $("seconds").value = (samples / RATE).toFixed(2);
    const buffer = context.createBuffer(1, floats.length, RATE);
    buffer.copyToChannel(floats, 0);
    const source = context.createBufferSource();
    source.buffer = buffer; source.connect(context.destination);
    playAt = Math.max(playAt, context.currentTime);  // a late piece plays now, not in the past
    source.start(playAt);
    playAt += buffer.duration;
  }
  $("status").value = "done";
}

async function download() {
  const format = $("format").value;
  $("status").value = "downloading " + format;
  const response = await fetch("/v1/audio/speech", { method: "POST", headers: headers(), body: body(format) });
  if (!response.ok) { $("status").value = "error: " + await failure(response); return; }
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await response.blob());
  link.download = "speech." + format;
  link.click();
  $("status").value = "saved speech." + format;
}

$("play").addEventListener("click", () => play().catch((e) => { $("status").value = "error: " + e; }));
$("download").addEventListener("click", () => download().catch((e) => { $("status").value = "error: " + e; }));
$("key").addEventListener("change", () => loadVoices());
// After every script has run: loadVoices uses voices.js's `library`.
document.addEventListener("DOMContentLoaded", () => loadVoices());
