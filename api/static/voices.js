// The voice library, shown when the served model clones: make a voice from an uploaded clip or a
// microphone recording, list the key's stored voices, delete them. Stored voices join the voice
// picker (app.js's loadVoices), so Play, Download and live mode speak in them. Uses `$`,
// `authorization`, `failure` and `loadVoices` from app.js.
"use strict";

class VoiceLibrary {
  constructor() {
    this.recorder = null;   // the MediaRecorder while recording
    this.recording = null;  // the last recording, a File, until a clip file is chosen instead
  }

  // The served model's entry of GET /v1/audio/voices: the section, its languages, the voices.
  show(model) {
    $("library").hidden = !model.clones;
    if (!model.clones) return;
    fill($("voice-language"), (model.languages || ["auto"]).map((l) => [l, l]));
    $("stored-voices").replaceChildren(...model.stored.map((voice) => this.item(voice)));
  }

  item(voice) {
    const li = document.createElement("li");
    li.dataset.id = voice.id;
    const about = [voice.mode, voice.seconds.toFixed(1) + " s", voice.language].filter(Boolean).join(", ");
    const remove = document.createElement("button");
    remove.textContent = "Delete";
    remove.addEventListener("click", () => this.remove(voice).catch((e) => this.status("error: " + e.message)));
    li.append(`${voice.name} (${about}) `, remove);
    return li;
  }

  async toggleRecording() {
    if (this.recorder) {
      const recorder = this.recorder;
      this.recorder = null;
      recorder.stop();  // its onstop keeps the recording
      return;
    }
    if (!navigator.mediaDevices) throw new Error("recording needs the page over https (or from localhost)");
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const type = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus"].find((t) => MediaRecorder.isTypeSupported(t));
    const recorder = new MediaRecorder(stream, type ? { mimeType: type } : {});
    const pieces = [], started = performance.now();
    const seconds = () => ((performance.now() - started) / 1000).toFixed(1) + " s";
    const ticking = setInterval(() => { $("recorded").value = "recording " + seconds(); }, 100);
    recorder.ondataavailable = (event) => pieces.push(event.data);
    recorder.onstop = () => {
      clearInterval(ticking);
      for (const track of stream.getTracks()) track.stop();
      const extension = recorder.mimeType.split(/[/;]/)[1] || "webm";
      this.recording = new File(pieces, "recording." + extension, { type: recorder.mimeType });
      $("voice-file").value = "";
      $("recorded").value = "recorded " + seconds();
      $("recording").src = URL.createObjectURL(this.recording);
      $("recording").hidden = false;
      $("record").textContent = "Record";
    };
    recorder.start();
    this.recorder = recorder;
    $("record").textContent = "Stop";
  }

  // A chosen file replaces the recording.
  fileChosen() {
    this.recording = null;
    $("recorded").value = "–";
    $("recording").hidden = true;
  }

  async save() {
    const clip = $("voice-file").files[0] || this.recording;
    if (!clip) { this.status("choose a clip or record one"); return; }
    const form = new FormData();
    form.append("name", $("voice-name").value);
    form.append("audio", clip, clip.name);
    if ($("voice-transcript").value.trim()) form.append("transcript", $("voice-transcript").value);
    if ($("voice-language").value !== "auto") form.append("language", $("voice-language").value);
    this.status("cloning " + clip.name);
    const response = await fetch("/v1/audio/voices", { method: "POST", headers: authorization(), body: form });
    if (!response.ok) { this.status("refused: " + await failure(response)); return; }
    const voice = await response.json();
    $("voice-form").reset();
    this.fileChosen();
    this.status(`saved ${voice.name} (${voice.mode}, ${voice.seconds.toFixed(1)} s)`);
    await loadVoices(voice.id);
  }

  async remove(voice) {
    const response = await fetch("/v1/audio/voices/" + encodeURIComponent(voice.id),
      { method: "DELETE", headers: authorization() });
    if (!response.ok) { this.status("refused: " + await failure(response)); return; }
    this.status("deleted " + voice.name);
    await loadVoices();
  }

  status(text) { $("voice-status").value = text; }
}

const library = new VoiceLibrary();
const libraryError = (e) => library.status("error: " + e.message);
$("record").addEventListener("click", () => library.toggleRecording().catch(libraryError));
$("voice-file").addEventListener("change", () => library.fileChosen());
$("voice-form").addEventListener("submit", (event) => { event.preventDefault(); library.save().catch(libraryError); });
