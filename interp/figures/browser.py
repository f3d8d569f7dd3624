"""A local Chromium, found and driven headless with the network cut off: static figure export
(through kaleido) and checks that an attention page renders."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

BROWSER_HINT = ("static figure export (PDF/SVG/PNG) needs Chromium: run scripts/install_chromium.sh "
                "(apt-get install -y chromium) or set BROWSER_PATH to a Chrome/Chromium executable; "
                "or write HTML only (--formats html)")
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome")


class BrowserNotFoundError(RuntimeError):
    """Static export needs a Chromium/Chrome; none was found."""


def find_browser() -> str | None:
    """``$BROWSER_PATH`` if set, else the first Chromium/Chrome on ``PATH`` (never downloads one).

    >>> find_browser()  # doctest: +SKIP
    '/usr/bin/chromium'
    """
    env = os.environ.get("BROWSER_PATH")
    if env:
        return env if os.access(env, os.X_OK) else None
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run", "--disable-sync", "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
    # no network at all: every host fails to resolve and any proxy use goes nowhere
    "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
)


def isolated_env(profile: str | Path) -> dict[str, str]:
    """The environment for a browser whose every file goes under ``profile``: Chromium writes
    its certificate store, font cache and crash reports into ``$HOME`` and the XDG folders even
    with its own ``--user-data-dir``, so those point into the profile too.

    >>> isolated_env("/tmp/p")["HOME"]
    '/tmp/p/home'
    """
    home = Path(profile) / "home"
    return {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".local" / "share")}


def isolated_launcher(browser: str, profile: str | Path) -> Path:
    """An executable in ``profile`` that starts ``browser`` with [`isolated_env`][interp.figures.browser.isolated_env]'s folders,
    for launchers (kaleido) that start the browser themselves with the caller's environment.

    >>> kaleido.Kaleido(path=str(isolated_launcher("/usr/bin/chromium", profile)))  # doctest: +SKIP
    """
    env = isolated_env(profile)
    launcher = Path(profile) / "browser"
    launcher.parent.mkdir(parents=True, exist_ok=True)
    settings = " ".join(f"{key}={shlex.quote(env[key])}" for key in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
                                                                      "XDG_DATA_HOME"))
    launcher.write_text(f"#!/bin/sh\nexport {settings}\nexec {shlex.quote(browser)} \"$@\"\n")
    launcher.chmod(0o700)
    return launcher


def headless_chromium(html_path: str | Path, *, screenshot: str | Path | None = None, window: tuple[int, int] = (1300, 1600),
                      browser: str | None = None, timeout: float = 60, budget_ms: int | None = None) -> str:
    """Open ``html_path`` in headless Chromium with the network cut off; return the DOM after its
    scripts ran (``--dump-dom``, taken after the load event, by which time the inline module
    scripts have run), and write a PNG screenshot when ``screenshot`` is given. ``budget_ms`` adds
    ``--virtual-time-budget`` (it made screenshots hang here, so it is off by default).

    Uses a fresh ``--user-data-dir`` each time, which is also the browser's ``$HOME``. Raises ``FileNotFoundError`` without a browser
    (see ``scripts/install_chromium.sh``).

    >>> dom = headless_chromium("figures/ablation_smollm2-135m.html", screenshot="ablation.png")  # doctest: +SKIP
    """
    browser = browser or find_browser()
    if browser is None:
        raise FileNotFoundError(BROWSER_HINT)
    url = Path(html_path).resolve().as_uri()

    def run(*extra: str) -> subprocess.CompletedProcess:
        # a fresh profile per run: a second browser on a profile still locked by the first can hang
        with tempfile.TemporaryDirectory(prefix="interp-chromium-") as profile:
            command = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={window[0]},{window[1]}",
                       *([f"--virtual-time-budget={budget_ms}"] if budget_ms else []), *extra, url]
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                                  env=isolated_env(profile))
        if done.returncode != 0:
            raise RuntimeError(f"{browser} {' '.join(extra)} {url} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done

    dom = run("--dump-dom").stdout
    if screenshot is not None:
        target = Path(screenshot).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        run(f"--screenshot={target}")
        if not target.exists():
            raise RuntimeError(f"{browser} did not write the screenshot {target}")
    return dom
