"""``crucible build [overrides] [--dry-run]``: the images the selected runs need.

Like ``nix build --dry-run``: list each image with its input hash and whether it is
already in the cache; without ``--dry-run``, build the missing ones (once each).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.config.compose import combinations, compose_config, to_typed
from engine.config.tree import no_task_selected
from engine.errors import BuildError
from engine.models import ImageRef
from engine.plan.setup_layer import PURPOSE as SETUP_PURPOSE
from engine.plan.spec import plan
from engine.run.session import Session, housekeeping, open_store, session_for
from engine.util.tables import format_table


def run_build(overrides: list[str], *, dry_run: bool, echo: Callable[[str], object] = print) -> int:
    if not any(o.startswith("task=") for o in overrides):
        raise no_task_selected()
    store = open_store()
    housekeeping(store)
    images: dict[str, tuple[ImageRef, list[str]]] = {}
    session: Session | None = None
    for combo in combinations(overrides):
        typed = to_typed(compose_config(combo))
        session = session or session_for(typed, store)
        planned = plan(typed, builder=session.builder)
        # The task image first, then an agent's layer over it, then its setup layer over those.
        for image in (*planned.images, *([planned.setup_image] if planned.setup_image is not None else [])):
            images.setdefault(image.tag, (image, []))[1].append(planned.spec.task_id)
    rows, failed = [], []
    for tag, (ref, tasks) in images.items():  # in plan order: a layer is built after its base
        assert session is not None  # images has entries only once a session planned them
        status = session.builder.status(ref)
        if not dry_run and status == "missing":
            try:
                record = session.builder.ensure(ref, store)
            except BuildError as exc:  # named by the tasks it is for, as a batch names it
                named = f"task{'s' if len(set(tasks)) > 1 else ''} {', '.join(sorted(set(tasks)))}: {exc}"
                if ref.purpose != SETUP_PURPOSE:
                    raise BuildError(named) from exc
                # A setup layer that cannot be built costs its runs only time (each sets its workspace
                # up itself, and says there why that fails): the other images are still built.
                failed.append(named)
                status = "failed (runs set up in their workspaces)"
                rows.append((tag, ref.input_hash[:16], status, ", ".join(sorted(set(tasks)))))
                continue
            status = f"built in {record.seconds:.1f}s"
        rows.append((tag, ref.input_hash[:16], status, ", ".join(sorted(set(tasks)))))
    echo(format_table(["image", "input hash", "status", "for tasks"], rows))
    missing = sum(1 for r in rows if r[2] == "missing")
    if dry_run:
        echo(f"{missing} to build, {len(rows) - missing} cached")
    if failed:
        raise BuildError(failed[0] + (f" (and {len(failed) - 1} more setup layers failed)" if len(failed) > 1 else ""))
    return 0
