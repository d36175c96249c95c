"""Deploying Eagle Eye: seed 000's air-gapped engine-side bundle and its command.

* ``install``: the installer the init container runs (shipped as the bundle's
  ``install.py``; standard library only, runs as a standalone file).
* ``wheels``: our wheel slimmed to the engine side, and its dependency wheels.
* ``build``: the deterministic ``source_code.tar.gz`` for ConfigMap ``vllm-source-code``.
* ``cli``: ``eagle-eye k8s bundle``.

Manifests live in ``deploy/k8s`` at the repository root; see docs/deployment.md.
"""
