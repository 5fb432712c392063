"""Chorus on Ray Serve (`pip install chorus-tts[ray]`): many replicas behind one endpoint.

deployment.py: the replica (one engine behind the app), its health check and headroom report;
router.py: where each new speech goes (the replica with the most room); metrics.py: each
replica's series into Ray's metrics; local.py: `chorus serve --replicas N`.
"""
