"""The model runner: builds the KV cache, fuses ops and captures decode graphs for a family, then
runs each step's embed → backbone → head → emit. It uses the backbone only as a `Backbone`."""
