"""Capacity: how many streams the engine can serve in real time, and whether one more fits.

Pure Python (the standard library only): the scheduler, the engine, the API's early refusal and
the Ray router all read it. Its vocabulary, each term defined once, in the module named:

- listener (listener.py): someone hearing a request's audio from its first chunk on without
  pause; a later segment of a speech plays only after the audio before it (`plays_after`).
- playback start, runs dry at, slack (listener.py): playback starts at the first audio (or
  after the audio before it); the listener runs dry at playback start + audio received; slack =
  runs dry at - now (<= 0: it has run dry and the listener hears silence).
- first audio due (listener.py): when a new request's first audio must leave: its speech's
  arrival + `max_queue_delay`. A request's deadline is when it runs dry, or before its first
  audio, when that is due; the scheduler serves the earliest deadline first.
- step cost, tail (step_cost.py): the predicted seconds of a step (a + b·rows + c·prompt
  tokens, learned from the steps run); a step's tail is that times the recent steps' usual worst
  ratio to it.
- overrun (overrun.py): how far the next k steps in a row may run over their predicted total.
- outlook, gain, lowest slack (projection.py): a stream as the projection sees it; the audio a
  run of steps makes minus the time it takes; the least slack a stream will have until its end.
- admission (admission.py): start now, wait in the queue, or be refused (`Overloaded`, with the
  seconds until there would be room).
- room now, room in time, seconds until room, real-time capacity (admission.py, published as
  `Room` in room.py): typical newcomers that could start at once / by their first audio's due
  time / when one could; streams the engine steps faster than real time.
- room left (room.py): the published room less what was started or sent since its report.

Every threshold these read lives in `CapacityConfig` (config.py).
"""
