"""The commands that start processes and wire the layers together (the composition root).

``router`` and ``up`` build a ``route.gateway.Router`` and mount the live dashboard
(``observe.dashboard``) on its app: the router and the observers never import each
other, only this layer knows both.
"""
