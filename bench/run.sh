#!/usr/bin/env bash
# The IK benchmark, one command: bench/run.sh [run.py options, e.g. --poses 200]
# Makes bench/.venv (bench/requirements.txt: numpy, scipy, ikpy, pin, roboticstoolbox-python,
# plus dhik itself) and uses the repo's bpy 5.0.1 venv .venv-bpy (make .venv-bpy/.ok) for
# Blender's IK. Not part of the test command. Writes bench/results/latest.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3.11}
if [ ! -f bench/.venv/.ok ] || [ bench/requirements.txt -nt bench/.venv/.ok ]; then
    "$PY" -m venv bench/.venv
    bench/.venv/bin/pip install -q --upgrade pip
    # a peer that fails to install is reported as unavailable in the table, not dropped
    while read -r req; do
        case "$req" in ''|\#*) continue ;; esac
        bench/.venv/bin/pip install -q "$req" || echo "bench: could not install $req" >&2
    done < bench/requirements.txt
    bench/.venv/bin/pip install -q -e .
    touch bench/.venv/.ok
fi
if [ ! -f .venv-bpy/.ok ]; then
    make .venv-bpy/.ok || echo "bench: no bpy venv; Blender rows will say so" >&2
fi
exec bench/.venv/bin/python bench/run.py "$@"
