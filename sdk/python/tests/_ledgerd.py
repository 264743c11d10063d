"""A real ledgerd for the tests: the Go binary, built once per run (or
taken from LEDGER_LEDGERD), serving on 127.0.0.1 from a fresh data
directory, with a catalog and policies (by default the repository's
testdata/declarations and testdata/policies) and one approver, alice."""

import atexit
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

import _paths

PASSWORD = "correct horse battery staple"

_built = {}


def binary():
    """The ledgerd binary, or None without Go (and without LEDGER_LEDGERD)."""
    path = os.environ.get("LEDGER_LEDGERD")
    if path:
        return path
    if "path" not in _built:
        go = shutil.which("go")
        if go is None:
            _built["path"] = None
        else:
            tmp = tempfile.mkdtemp(prefix="sdk-py-ledgerd-bin-")
            atexit.register(shutil.rmtree, tmp, True)
            out = os.path.join(tmp, "ledgerd")
            subprocess.run([go, "build", "-o", out, "./cmd/ledgerd"], cwd=_paths.REPO, check=True, timeout=900)
            _built["path"] = out
    return _built["path"]


def binary_or_skip():
    """binary(), or SkipTest (a failure with LEDGER_CI=1) without one."""
    b = binary()
    if b is None:
        if os.environ.get("LEDGER_CI") == "1":
            raise RuntimeError("no Go toolchain to build ledgerd (LEDGER_CI=1)")
        raise unittest.SkipTest("no Go toolchain and no LEDGER_LEDGERD")
    return b


class Ledgerd:
    """One ledgerd process on a fresh data directory under tmp."""

    def __init__(self, binary, tmp, *, catalog=None, policies=None):
        self.binary = binary
        self.data = os.path.join(tmp, "data")
        r = subprocess.run([binary, "init", "--name", "ledger.example.com/sdk-py", "--data", self.data,
                            "--mediator", "billing"], capture_output=True, text=True, check=True, timeout=60)
        self.token = re.search(r"token \(shown once, stored only as a hash\): (\S+)", r.stdout).group(1)
        self.vkey = re.search(r"verifier key: (\S+)", r.stdout).group(1)
        subprocess.run([binary, "approver", "add", "alice", "--actions", "make_payment", "--data", self.data],
                       input=PASSWORD, capture_output=True, text=True, check=True, timeout=60)
        cfg_path = os.path.join(self.data, "ledgerd.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        cfg["catalog_dir"] = catalog or os.path.join(_paths.TESTDATA, "declarations")
        cfg["policy_dir"] = policies or os.path.join(_paths.TESTDATA, "policies")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        self.proc = None
        self.url = None
        self.start("127.0.0.1:0")

    def start(self, listen):
        """Serve on listen (host:port) and wait until ledgerd says where."""
        self.proc = subprocess.Popen([self.binary, "serve", "--data", self.data, "--listen", listen],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in self.proc.stdout], daemon=True).start()
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise RuntimeError("ledgerd did not say where it listens within 60 s")
            m = re.search(r"serving \S+ on (http://127\.0\.0\.1:\d+)", line)
            if m:
                url = m.group(1)
        self.url = url

    def restart(self):
        """Stop and start again on the same data directory and port (the
        catalog is read at start only)."""
        listen = urllib.parse.urlparse(self.url).netloc
        self.stop()
        self.start(listen)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()

    def _sign_in(self):
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        headers = {"Accept": "application/json", "Origin": self.url}
        req = urllib.request.Request(self.url + "/approvals/sign-in", headers=headers, method="POST",
                                     data=urllib.parse.urlencode({"name": "alice", "password": PASSWORD}).encode())
        csrf = json.load(opener.open(req, timeout=30))["csrf"]
        return opener, csrf

    def pending(self):
        """The ids of the approvals alice may decide, from her page."""
        opener, _ = self._sign_in()
        page = json.load(opener.open(urllib.request.Request(self.url + "/approvals/",
                                                            headers={"Accept": "application/json"}), timeout=30))
        return [a["id"] for a in page.get("approvals") or []]

    def approve(self, approval_id, verdict="approve"):
        """Sign in as alice on the approver's page and give a verdict."""
        opener, csrf = self._sign_in()
        headers = {"Accept": "application/json", "Origin": self.url}
        page = json.load(opener.open(urllib.request.Request(self.url + "/approvals/" + approval_id,
                                                            headers={"Accept": "application/json"}), timeout=30))
        form = {"verdict": verdict, "preview_digest": page["preview_digest"], "csrf": csrf, "confirm": "yes"}
        req = urllib.request.Request(self.url + "/approvals/" + approval_id + "/verdict", headers=headers,
                                     method="POST", data=urllib.parse.urlencode(form).encode())
        opener.open(req, timeout=30).read()
        return page
