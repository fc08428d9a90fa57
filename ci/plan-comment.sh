#!/usr/bin/env bash
# The pull-request job of kubectl-camelk, as the GitHub workflow and the GitLab
# template run it (ci/github/camelk-plan.yml, ci/gitlab/camelk-plan.gitlab-ci.yml).
#
# 1. `kubectl camelk validate` on the head's manifest, printing annotations for
#    the forge (CAMELK_ANNOTATIONS=github|gitlab); an invalid manifest ends
#    the job with exit 1 and no comment. The manifest is read from the Git
#    object of CAMELK_HEAD, never from the work tree: the job may hold
#    credentials with the base branch checked out, and a pull request's file
#    (a symlink to a secret, say) must stay data.
# 2. `kubectl camelk plan --base --head -o markdown`: from the reconciler's
#    plan endpoint when CAMELK_PLAN_SERVER is set (token in CAMELK_PLAN_TOKEN,
#    no cluster credentials needed), else from the cluster of KUBECONFIG (a
#    read-only identity is enough). The comment body goes to CAMELK_COMMENT_FILE;
#    it starts with a hidden marker, so the job updates one comment per
#    assignment instead of adding one per push.
# 3. With CAMELK_FAIL_ON_BLOCKED=true, exit 2 when the plan has blocked moves.
#
# Variables: CAMELK_BASE, CAMELK_HEAD (revisions: SHAs, branches or refs;
# required), CAMELK_MANIFEST (default operator-assignment.yaml, relative to the
# repository root), CAMELK_PLAN_SERVER, CAMELK_PLAN_TOKEN, CAMELK_NAMESPACE,
# CAMELK_COMMENT_FILE (default camelk-plan.md), CAMELK_ANNOTATIONS (default
# github), CAMELK_FAIL_ON_BLOCKED (default false), CAMELK_MAX_BYTES (default
# 60000). The plugin is run as `kubectl-camelk` from PATH. The current directory
# is the root of a Git clone holding CAMELK_HEAD and, unless CAMELK_PLAN_SERVER
# is set, CAMELK_BASE (a full clone, or both revisions fetched).
set -euo pipefail

: "${CAMELK_BASE:?set CAMELK_BASE to the base revision of the pull request}"
: "${CAMELK_HEAD:?set CAMELK_HEAD to the head revision of the pull request}"
manifest=${CAMELK_MANIFEST:-operator-assignment.yaml}
comment=${CAMELK_COMMENT_FILE:-camelk-plan.md}
annotations=${CAMELK_ANNOTATIONS:-github}
max_bytes=${CAMELK_MAX_BYTES:-60000}
ns_flag=()
[[ -n ${CAMELK_NAMESPACE:-} ]] && ns_flag=(-n "$CAMELK_NAMESPACE")

# A plan from the cluster reads both revisions from this clone; the plan server
# fetches them itself.
revisions=("$CAMELK_HEAD")
[[ -n ${CAMELK_PLAN_SERVER:-} ]] || revisions+=("$CAMELK_BASE")
for rev in "${revisions[@]}"; do
    if ! git rev-parse --quiet --verify "$rev^{commit}" >/dev/null; then
        echo "camelk: no commit $rev in this clone: fetch the full history (fetch-depth 0, GIT_DEPTH 0) or that revision" >&2
        exit 1
    fi
done
# The head's manifest at its own path under a scratch directory, so that the
# annotations name the path the pull request's diff shows.
staged=$(mktemp -d)
trap 'rm -rf "$staged"' EXIT
mkdir -p "$staged/$(dirname "$manifest")"
if ! git cat-file blob "$CAMELK_HEAD:$manifest" >"$staged/$manifest"; then
    echo "camelk: no $manifest at $CAMELK_HEAD" >&2
    exit 1
fi
if ! (cd "$staged" && kubectl-camelk validate -f "$manifest" -o "$annotations"); then
    echo "camelk: $manifest is invalid at $CAMELK_HEAD; no plan" >&2
    exit 1
fi

source_flags=()
if [[ -n ${CAMELK_PLAN_SERVER:-} ]]; then
    : "${CAMELK_PLAN_TOKEN:?CAMELK_PLAN_SERVER needs CAMELK_PLAN_TOKEN}"
    source_flags=(--server "$CAMELK_PLAN_SERVER")
fi
plan=(kubectl-camelk "${ns_flag[@]}" plan -f "$manifest" "${source_flags[@]}"
    --base "$CAMELK_BASE" --head "$CAMELK_HEAD")
"${plan[@]}" -o markdown --max-bytes "$max_bytes" >"$comment"
echo "camelk: plan of $CAMELK_BASE..$CAMELK_HEAD written to $comment" >&2

if [[ ${CAMELK_FAIL_ON_BLOCKED:-false} == true ]]; then
    # The comment's summary line: "N moves in M batches, ..., B blocked, ...".
    blocked=$(sed -n 's/.*, \([0-9][0-9]*\) blocked,.*/\1/p' "$comment" | head -n 1)
    if [[ ${blocked:-0} -gt 0 ]]; then
        echo "camelk: $blocked blocked moves (CAMELK_FAIL_ON_BLOCKED=true)" >&2
        exit 2
    fi
fi
