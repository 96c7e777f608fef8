"""The site's browser tests: Playwright driving Debian's chromium.

Playwright (the `test` extra) launches the system browser through `executable_path`, so no
`playwright install` browser download is needed (CI reaches only PyPI and Debian).
"""

from __future__ import annotations

import shutil

from playwright.sync_api import Browser, ConsoleMessage, Page


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def open_page(browser: Browser, *, width: int = 1400, height: int = 900) -> tuple[Page, list[str]]:
    """A fresh page, and the list that collects what a user would see as breakage on it: console
    errors and assertions, uncaught exceptions, and failed loads (Chromium logs those to the
    console as "Failed to load resource", with the URL as the message's location)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type in ("error", "assert"):
            errors.append(f"{message.text} {message.location.get('url', '')}".strip())

    page.on("console", console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors
