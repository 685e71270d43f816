# crucible's tail, appended by envs/harbor/image.py to a Harbor task's environment/Dockerfile.
# (The legacy builder: no heredocs.) As root: the agent's user (uid 1000, unless the image has
# one), the working directory handed to it, /logs/verifier owned by root, an empty /solution
# the agent's uid may write (where the golden unpacks Harbor's oracle), git where missing,
# and the baseline of the working directory committed into a root-only repository outside it
# (/var/lib/crucible/harbor/base.git): capture diffs against it, grading applies onto it; the
# marker `built` last (a task that captures its container takes what changed after it).
USER root
ARG CRUCIBLE_WORKDIR
RUN set -eu; \
    if ! command -v git >/dev/null 2>&1; then \
      apt-get update; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    if ! getent passwd 1000 >/dev/null; then \
      getent group 1000 >/dev/null || groupadd -g 1000 agent; \
      useradd -m -u 1000 -g 1000 -s /bin/bash agent; \
    fi; \
    mkdir -p "$CRUCIBLE_WORKDIR" /logs/agent; \
    install -d -o root -g root -m 755 /logs/verifier; \
    install -d -o 1000 -m 755 /solution; \
    chown -R 1000:1000 "$CRUCIBLE_WORKDIR" /logs/agent; \
    install -d -o root -g root -m 700 /var/lib/crucible /var/lib/crucible/harbor; \
    git -c safe.directory='*' --git-dir=/var/lib/crucible/harbor/base.git --work-tree="$CRUCIBLE_WORKDIR" init -q; \
    git -c safe.directory='*' --git-dir=/var/lib/crucible/harbor/base.git --work-tree="$CRUCIBLE_WORKDIR" add -A -f; \
    git -c safe.directory='*' -c user.name=crucible -c user.email=crucible@localhost \
      --git-dir=/var/lib/crucible/harbor/base.git --work-tree="$CRUCIBLE_WORKDIR" commit -q --allow-empty -m baseline; \
    touch /var/lib/crucible/harbor/built
WORKDIR ${CRUCIBLE_WORKDIR}
