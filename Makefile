# dhik: every target sets itself up on a fresh machine that has only python3.11.
PY ?= python3.11
VENV := .venv
BPYVENV := .venv-bpy
SCENE ?= arm7

.PHONY: test test-core test-addon lint demo bench zip clean typecheck typecheck-core test-addon-45 \
	test-install fuzz

# Property tests (hypothesis) draw the same examples on every `make test` run: the "ci"
# profile of tests/conftest.py is derandomized. `make fuzz` draws fresh random examples,
# ten times as many (HYPOTHESIS_PROFILE=fuzz overrides CI).
export CI ?= 1

$(VENV)/.ok: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test,cluster,robots]'
	touch $@

# Real Blender as a Python module (bpy 5.0.1 needs Python 3.11 and numpy < 2).
$(BPYVENV)/.ok: pyproject.toml
	$(PY) -m venv $(BPYVENV)
	$(BPYVENV)/bin/pip install -q --upgrade pip
	$(BPYVENV)/bin/pip install -q 'bpy==5.0.1' -e '.[test,robot-data]'
	touch $@

lint: $(VENV)/.ok
	$(VENV)/bin/ruff check .

# (and the add-on's bpy-free key module, loaded by path: tests/addon/conftest.py BPY_FREE)
test-core: $(VENV)/.ok
	$(VENV)/bin/python -m pytest tests/core tests/addon/test_key_curves.py \
		--cov=dhik --cov-report=term:skip-covered

# Static types of the core (numpy only): mypy on the package as the folders lay it out.
typecheck-core: $(VENV)/.ok
	MYPYPATH=. $(VENV)/bin/mypy --explicit-package-bases --check-untyped-defs \
		--ignore-missing-imports -p core

# Add-on tests in real Blender, and the core tests again on Blender's numpy 1.26.
test-addon: $(BPYVENV)/.ok
	$(BPYVENV)/bin/python -m pytest tests/addon tests/core

# Static types of the add-on: mypy with fake-bpy-module's stubs of Blender 5.0. The stubs
# ship a package named bpy, so they get a venv of their own (never beside the real bpy).
# mypy must see dhik_addon as a sub-package of the extension (it imports ..core), so it
# runs from .venv-types/src, where dhik_ext is a symlink to the repository root.
TYPESVENV := .venv-types
$(TYPESVENV)/.ok:
	$(PY) -m venv $(TYPESVENV)
	echo '*' > $(TYPESVENV)/.gitignore
	$(TYPESVENV)/bin/pip install -q --upgrade pip
	$(TYPESVENV)/bin/pip install -q fake-bpy-module-5-0 mypy numpy
	mkdir -p $(TYPESVENV)/src
	ln -sfn $(CURDIR) $(TYPESVENV)/src/dhik_ext
	touch $@

typecheck: $(TYPESVENV)/.ok
	cd $(TYPESVENV)/src && ../bin/mypy --config-file $(CURDIR)/mypy.ini -p dhik_ext.dhik_addon

# The add-on tests on Blender 4.5 LTS (newest bpy 4.5.x from the package index).
BPY45VENV := .venv-bpy45
$(BPY45VENV)/.ok: pyproject.toml
	$(PY) -m venv $(BPY45VENV)
	echo '*' > $(BPY45VENV)/.gitignore
	$(BPY45VENV)/bin/pip install -q --upgrade pip
	$(BPY45VENV)/bin/pip install -q 'bpy>=4.5,<4.6' -e '.[test,robot-data]'
	touch $@

test-addon-45: $(BPY45VENV)/.ok
	$(BPY45VENV)/bin/python -m pytest tests/addon

# The extension zip, built and validated by Blender's own tool (from the bpy wheel).
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' core/__init__.py)
ZIP := dist/dhik-$(VERSION).zip
zip: $(BPYVENV)/.ok
	$(BPYVENV)/bin/python tools/build_zip.py --output-dir dist

# Installs that work: the wheel built from the sources and installed in a clean venv, the
# zip installed in a fresh Blender profile (bpy 5.0.1); dhik fk, dhik bake and a Blender
# bake of a sample scene run from them.
test-install: $(VENV)/.ok $(BPYVENV)/.ok zip
	DHIK_ZIP=$(CURDIR)/$(ZIP) DHIK_BPY_PYTHON=$(CURDIR)/$(BPYVENV)/bin/python \
		$(VENV)/bin/python -m pytest tests/install

# The test command of the README: lint, core tests (numpy 2), add-on tests in real Blender
# 5.0.1 (numpy 1.26) and 4.5 LTS, mypy on the add-on and on the core, the installs. Every
# part runs, whatever failed before it; the failed parts are named together at the end.
TEST_PARTS := lint test-core test-addon typecheck typecheck-core test-addon-45 test-install
test:
	@failed=""; \
	for part in $(TEST_PARTS); do \
		echo "=== make $$part"; \
		$(MAKE) --no-print-directory $$part || failed="$$failed $$part"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed"; exit 1; fi; \
	echo "make test: every part passed ($(TEST_PARTS))"

# The main job: a headless Blender bake of a sample scene with the real add-on.
demo: $(BPYVENV)/.ok
	mkdir -p out
	$(BPYVENV)/bin/python tools/demo_bake.py sample_scenes/$(SCENE) out

# The IK benchmark against ikpy, pinocchio, roboticstoolbox and Blender's IK (about 7 min
# on 2 cores; the first run also installs bench/.venv). Not part of `make test`.
bench: $(BPYVENV)/.ok
	bench/run.sh

# Fresh random property-test examples (not part of `make test`; failures print a
# @reproduce_failure blob to paste into the test).
fuzz: $(VENV)/.ok
	HYPOTHESIS_PROFILE=fuzz $(VENV)/bin/python -m pytest tests/core -m hypothesis

clean:
	rm -rf $(VENV) $(BPYVENV) $(BPY45VENV) $(TYPESVENV) bench/.venv dist out
