"""The live views of the fleet: the web dashboard and ``eagle-eye top``.

``state`` samples a fleet view (and, on a router, its request statistics) into frames
(``frame``) and history, pure; ``app`` serves the page, the frames over SSE and longer
history from Prometheus; ``cli`` runs it standalone; ``top`` draws the same frames in a
terminal, laid out by ``top_render`` (pure).
The router's command mounts ``app`` on the router (``commands/compose.py``).
"""
