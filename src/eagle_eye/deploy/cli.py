"""``eagle-eye k8s``: Kubernetes helpers, today the ConfigMap bundle of seed 000.

``eagle-eye k8s bundle --out DIR`` runs on the operator's machine (which may reach a
package index); the pods that use the bundle never do. The logic lives in
``eagle_eye.deploy.build``; this module only parses flags and prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from eagle_eye import __version__
from eagle_eye.deploy.build import CONFIGMAP_LIMIT_BYTES, build_bundle, kubectl_commands
from eagle_eye.deploy.install import BundleError
from eagle_eye.deploy.wheels import find_source_tree


@click.group()
def k8s() -> None:
    """Kubernetes helpers (manifests live in deploy/k8s; see docs/deployment.md)."""


@k8s.command()
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write source_code.tar.gz into (created if missing).",
)
@click.option(
    "--source",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Eagle Eye source tree to build the wheel from (default: the checkout this "
    "command runs from; without one, this release's wheel is downloaded).",
)
@click.option(
    "--wheel",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Use this eagle-eye wheel instead of building one (offline build machines).",
)
@click.option(
    "--find-links",
    multiple=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Directory of pre-downloaded dependency wheels (repeatable).",
)
@click.option("--no-index", is_flag=True, help="Use only --find-links, never a package index.")
@click.option(
    "--full-wheel",
    is_flag=True,
    help="Ship the whole eagle-eye wheel, not only its engine-side modules (VERSION+engine).",
)
@click.option("--namespace", default="ai-inference", show_default=True)
@click.option("--configmap", default="vllm-source-code", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bundle(
    out_dir: Path,
    source: Path | None,
    wheel: Path | None,
    find_links: tuple[Path, ...],
    no_index: bool,
    full_wheel: bool,
    namespace: str,
    configmap: str,
    as_json: bool,
) -> None:
    """Build source_code.tar.gz: the vLLM plugin and its dependencies, air-gapped.

    The tarball holds pure-Python wheels (eagle-eye's engine-side modules as
    VERSION+engine, nats-py, click), requirements.txt,
    manifest.json and install.py, which the init container code-extractor runs with no
    network. Prints the kubectl commands that load it into the ConfigMap.
    """
    if wheel is None and source is None:
        source = find_source_tree(Path(__file__).resolve().parent)
    try:
        built = build_bundle(
            out_dir,
            source=source,
            wheel=wheel,
            find_links=find_links,
            no_index=no_index,
            full_wheel=full_wheel,
            project_version=__version__,
        )
    except BundleError as exc:
        raise click.ClickException(str(exc)) from exc
    commands = kubectl_commands(built.tarball, namespace=namespace, configmap=configmap)
    if as_json:
        result = {
            "tarball": str(built.tarball),
            "size_bytes": built.size_bytes,
            "configmap_bytes": built.configmap_bytes,
            "configmap_limit_bytes": CONFIGMAP_LIMIT_BYTES,
            "sha256": built.sha256,
            "wheels": [w.as_json() for w in built.wheels],
            "kubectl": commands,
        }
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"wrote {built.tarball} ({built.size_bytes} bytes, sha256 {built.sha256})")
    for w in built.wheels:
        click.echo(f"  {w.file}")
    click.echo(
        f"ConfigMap size {built.configmap_bytes} of {CONFIGMAP_LIMIT_BYTES} bytes allowed.\n"
        "\nLoad it into the cluster (seed 000, step 2):\n"
    )
    for command in commands:
        click.echo(f"  {command}")
    click.echo("\nThen: kubectl apply -k deploy/k8s/overlays/vllm-nvidia   (or vllm-ascend)")
