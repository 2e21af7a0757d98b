"""A page opened in headless Chromium (Debian's `chromium` and `chromium-driver`, through
selenium), and what a reader would find broken in it.

`ensure_chromium` installs the two packages where they are missing (as root, with apt-get) and
raises Unavailable where that cannot be done. `problems(driver, page)` lists, for a page on
disk: each image that did not load, each table without a row, each link to a file that does not
exist or an anchor that is not on the page, each reference outside the page's folder to the
network, and each message the page logged as an error (a failed load included).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

PACKAGES = ("chromium", "chromium-driver")
# Chromium and chromedriver as Debian installs them.
BROWSER, DRIVER = "chromium", "chromedriver"


class Unavailable(RuntimeError):
    """Chromium cannot be installed or started here."""


def ensure_chromium(log: Path, timeout: float = 300) -> None:
    """apt-get installs chromium and chromium-driver when one is missing (root only)."""
    if shutil.which(BROWSER) and shutil.which(DRIVER):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable("chromium and chromium-driver are not installed, and installing them "
                          "needs root and apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
               "-o", "DPkg::Lock::Timeout=120", *PACKAGES]
    with open(log, "a") as out:
        # The package lists may be missing or stale on a fresh machine: update once on failure.
        for cmd in (install, ["apt-get", "update", "-qq"], install):
            try:
                rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    timeout=timeout / 3).returncode
            except subprocess.TimeoutExpired:
                rc = -1
            if rc == 0 and cmd is install and shutil.which(BROWSER) and shutil.which(DRIVER):
                return
    raise Unavailable(f"`{' '.join(install)}` failed; see {log}")


def start_driver(width: int = 1400, height: int = 2400):
    """A headless Chromium under chromedriver that keeps the pages' console messages."""
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError as err:
        raise Unavailable(f"selenium is not importable ({err}); scripts/setup.sh installs it")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which(BROWSER)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:  # the driver named here: selenium never looks for one on the network
        return webdriver.Chrome(service=Service(executable_path=shutil.which(DRIVER)),
                                options=options)
    except WebDriverException as err:
        raise Unavailable(f"chromium did not start: {err.msg}")


# Run in the page: what the checks need, as plain lists.
INSPECT = """
const out = {images: [], emptyTables: 0, tables: 0, links: [], ids: [], external: []};
for (const img of document.images)
  out.images.push([img.getAttribute('src'), img.complete && img.naturalWidth > 0]);
for (const t of document.querySelectorAll('table')) {
  out.tables += 1;
  if (t.querySelectorAll('tbody tr').length === 0) out.emptyTables += 1;
}
for (const a of document.querySelectorAll('a[href]')) out.links.push(a.getAttribute('href'));
for (const e of document.querySelectorAll('[id]')) out.ids.push(e.id);
for (const e of document.querySelectorAll('[src], link[href]')) {
  const url = e.getAttribute('src') || e.getAttribute('href');
  if (/^[a-z]+:\\/\\//i.test(url)) out.external.push(url);
}
return out;
"""


def link_problem(href: str, page: Path, ids: set[str]) -> str | None:
    """Why a link of the page is broken, or None."""
    parsed = urlparse(href)
    if parsed.scheme in ("http", "https"):
        return f"link to the network: {href}"
    if parsed.scheme not in ("", "file"):
        return None
    if not parsed.path:
        return None if parsed.fragment in ids else f"anchor not on the page: {href}"
    target = (page.parent / unquote(parsed.path)).resolve()
    return None if target.exists() else f"link to a missing file: {href}"


def problems(driver, page: Path) -> list[str]:
    """What is broken in `page` (a file) once Chromium has loaded it."""
    driver.get(page.resolve().as_uri())
    found = driver.execute_script(INSPECT)
    issues = [f"image did not load: {src}" for src, ok in found["images"] if not ok]
    if found["emptyTables"]:
        issues.append(f"{found['emptyTables']} of {found['tables']} table(s) without a row")
    ids = set(found["ids"])
    issues += [p for p in (link_problem(h, page, ids) for h in found["links"]) if p]
    issues += [f"fetches from the network: {url}" for url in found["external"]]
    issues += [f"console {e['level']}: {e['message']}" for e in driver.get_log("browser")
               if e["level"] == "SEVERE"]
    return issues


def screenshot(driver, page: Path, out: Path) -> Path:
    """The whole page as a PNG at `out` (the window grown to the page's height)."""
    driver.get(page.resolve().as_uri())
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(height, 800), 12000))
    out.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(out))
    return out
