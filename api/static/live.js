// Live mode: text goes over the speak WebSocket (Deepgram's protocol) as it is typed or replayed
// word by word; the audio plays as it arrives, Stop sends Clear, and words light up as they are
// spoken. Uses `$`, `Pcm16Reader` and `modelTimestamps` from app.js.
"use strict";

const LIVE_RATE = 24000;

// Plays the connection's audio back to back and remembers where each piece plays, so that a time
// in the connection's stream (a word's start, from a Timestamps message) maps to the audio clock.
class StreamPlayer {
  constructor(context) {
    this.context = context;
    this.received = 0;  // samples of the stream so far, played or not: the server's clock
    this.playAt = 0;
    this.pieces = [];   // {from, to (stream seconds), at (audio clock)}, newest last
    this.sources = new Set();
  }

  play(floats) {
    const buffer = this.context.createBuffer(1, floats.length, LIVE_RATE);
    buffer.copyToChannel(floats, 0);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const at = Math.max(this.playAt, this.context.currentTime + 0.03);  // a late piece plays now
    source.start(at);
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
    const from = this.received / LIVE_RATE;
    this.pieces.push({ from, to: from + buffer.duration, at });
    if (this.pieces.length > 256) this.pieces.shift();
    this.received += floats.length;
    this.playAt = at + buffer.duration;
  }

  // Audio of cleared text that was already on its way: it counts in the stream, but is not played.
  skip(samples) { this.received += samples; }

  // The audio clock at which stream time `t` plays (null when it was not played).
  clockOf(t) {
    for (let i = this.pieces.length - 1; i >= 0; i--) {
      const piece = this.pieces[i];
      if (piece.from <= t + 1e-6) return t < piece.to + 1e-6 ? piece.at + (t - piece.from) : null;
    }
    return null;
  }

  stop() {
    for (const source of this.sources) source.stop();
    this.sources.clear();
    this.pieces = [];
    this.playAt = 0;
  }
}

class LiveSession {
  constructor() {
    this.socket = null;
    this.player = null;
    this.pcm = new Pcm16Reader();
    this.words = [];      // {el, from, to}: timed words not yet fully spoken, in order
    this.spoken = 0;
    this.timed = 0;
    this.late = 0;
    this.clearing = 0;          // Clears sent but not answered: audio until then is the cleared text's
    this.spokeSinceClear = true; // after the last Cleared with no new text, any audio would be late
    this.waitingSince = null;
    this.turnHasAudio = false;
    this.sentText = "";
    this.replay = null;
    setInterval(() => this.highlight(), 25);
  }

  // The open connection (opened once even when several messages ask for it at the same time).
  ensureOpen() {
    if (this.socket && this.socket.readyState <= WebSocket.OPEN) return this.opened;
    if (!this.player) {
      const context = new AudioContext({ sampleRate: LIVE_RATE });
      this.player = new StreamPlayer(context);
    }
    this.player.context.resume();
    const query = new URLSearchParams({ model: $("voice").value, encoding: "linear16", sample_rate: String(LIVE_RATE) });
    if (modelTimestamps.includes("word")) query.set("timestamps", "word");
    for (const [name, value] of Object.entries(voicing())) query.set(name, value);
    if (Number($("speed").value) && Number($("speed").value) !== 1) query.set("speed", $("speed").value);
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const key = $("key").value;
    // Browsers cannot set headers on a WebSocket: the key goes as the `token` subprotocol.
    const socket = new WebSocket(`${scheme}//${location.host}/v1/speak?${query}`, key ? ["token", key] : []);
    socket.binaryType = "arraybuffer";
    socket.onmessage = (event) => this.onMessage(event.data);
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.clearing = 0;
      this.spokeSinceClear = true;
      this.status("closed");
    };
    this.socket = socket;
    this.player.received = 0;  // a new connection's stream starts at 0
    this.opened = new Promise((resolve, reject) => {
      socket.onopen = () => resolve(socket);
      socket.onerror = () => reject(new Error("the WebSocket did not open (key? voice?)"));
    });
    return this.opened;
  }

  async send(message) {
    const socket = await this.ensureOpen();
    socket.send(JSON.stringify(message));
  }

  async speak(text) {
    if (!text) return;
    this.spokeSinceClear = true;
    await this.send({ type: "Speak", text });
    if (/[.!?](\s|$)/.test(text)) this.startWaiting();
  }

  async flush() {
    this.startWaiting();
    await this.send({ type: "Flush" });
  }

  async stop() {
    if (this.replay) { clearInterval(this.replay); this.replay = null; }
    if (!this.socket) return;
    this.clearing += 1;
    this.spokeSinceClear = false;
    this.player.stop();
    for (const word of this.words) word.el.classList.remove("now");
    this.words = [];
    this.waitingSince = null;
    this.turnHasAudio = false;
    await this.send({ type: "Clear" });
    this.status("stopping");
  }

  // The first audio of a turn is timed from its first sentence end (or Flush).
  startWaiting() {
    if (this.waitingSince === null && !this.turnHasAudio) this.waitingSince = performance.now();
  }

  onMessage(data) {
    if (data instanceof ArrayBuffer) return this.onAudio(new Uint8Array(data));
    const message = JSON.parse(data);
    if (message.type === "Timestamps") return this.onWords(message.words);
    if (message.type === "Flushed") { this.turnHasAudio = false; this.waitingSince = null; this.status("flushed"); }
    else if (message.type === "Cleared") { this.clearing -= 1; this.status("cleared"); }
    else if (message.type === "Metadata") this.status("connected");
    else if (message.type === "Warning" || message.type === "Error") {
      this.status(message.type.toLowerCase() + ": " + (message.description || message.err_msg || message.code));
    }
  }

  onAudio(bytes) {
    const floats = this.pcm.read(bytes);
    if (this.clearing || !this.spokeSinceClear) {
      if (!this.clearing) $("live-late").value = String(++this.late);
      this.player.skip(floats.length);
      return;
    }
    if (this.waitingSince !== null) {
      $("live-latency").value = ((performance.now() - this.waitingSince) / 1000).toFixed(3) + " s";
      this.waitingSince = null;
    }
    this.turnHasAudio = true;
    this.player.play(floats);
    $("live-seconds").value = (this.player.received / LIVE_RATE).toFixed(2);
    this.status("speaking");
  }

  onWords(words) {
    if (this.clearing) return;
    for (const word of words) {
      const from = this.player.clockOf(word.start);
      if (from === null) continue;
      const el = document.createElement("span");
      el.textContent = word.word;
      $("words").append(el, " ");
      this.words.push({ el, from, to: from + (word.end - word.start) });
      $("live-words").value = String(++this.timed);
    }
  }

  highlight() {
    if (!this.player) return;
    const now = this.player.context.currentTime;
    while (this.words.length && this.words[0].to <= now) {
      const word = this.words.shift();
      word.el.classList.remove("now");
      word.el.classList.add("spoken");
      $("live-spoken").value = String(++this.spoken);
    }
    for (const word of this.words) {
      if (word.from > now) break;
      word.el.classList.add("now");
    }
  }

  // Sends the text above word by word at `pace` words a second, then a Flush: an LLM's reply.
  async replayText(text, pace) {
    await this.stop();
    const pieces = text.split(/(?<=\s)/);
    let next = 0;
    this.replay = setInterval(() => {
      if (next < pieces.length) {
        this.speak(pieces[next++]).catch((e) => this.status("error: " + e.message));
      } else {
        clearInterval(this.replay);
        this.replay = null;
        this.flush().catch((e) => this.status("error: " + e.message));
      }
    }, 1000 / pace);
  }

  // Typed text: what was appended since the last message goes out (edits before it do not).
  typed(value) {
    const fresh = value.startsWith(this.sentText) ? value.slice(this.sentText.length) : "";
    this.sentText = value;
    return this.speak(fresh);
  }

  status(text) { $("live-status").value = text; }
}

const live = new LiveSession();
const report = (e) => live.status("error: " + e.message);
$("replay").addEventListener("click", () => live.replayText($("text").value, Number($("pace").value) || 30).catch(report));
$("flush").addEventListener("click", () => live.flush().catch(report));
$("stop").addEventListener("click", () => live.stop().catch(report));
$("live-text").addEventListener("input", (e) => live.typed(e.target.value).catch(report));
$("live-text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); live.flush().catch(report); }
});
// Another voice, language, instructions, key or speed needs another connection.
for (const id of ["voice", "language", "instructions", "key", "speed"]) $(id).addEventListener("change", () => { if (live.socket) live.socket.close(); });
