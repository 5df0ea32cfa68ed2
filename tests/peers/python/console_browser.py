"""Drives the operator console in Debian's Chromium (headless, through Playwright's
Python API with the system browser: no browser download) while an MCP client (the
official Python SDK) makes calls through the same gateway, and prints one JSON report of
what the browser saw. The Rust test (tests/console.rs) asserts on the report.

Usage:
    console_browser.py --base http://127.0.0.1:PORT --token TOKEN --shots DIR

The gateway must run with `--access grants`, front the fixture server as `fx` (with
SERVICE_TOKEN set), and TOKEN must be a token of agent `alice`, who holds a grant of fx.
"""

import argparse
import asyncio
import json
import os
import shutil
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from playwright.async_api import async_playwright

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path():
    found = os.environ.get("AIRLOCK_CHROMIUM") or shutil.which("chromium")
    if not found:
        sys.exit("no Chromium: install Debian's chromium package (the test command does)")
    return found


def text_of(result):
    return "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")


async def call_quietly(session, tool, args):
    """A call's outcome as the client sees it: its text, or the error it raised."""
    try:
        result = await session.call_tool(tool, args)
        return {"is_error": bool(result.isError), "text": text_of(result)}
    except Exception as e:  # the gateway may answer with a JSON-RPC error
        return {"is_error": True, "text": str(e)}


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--shots", required=True)
    parser.add_argument("--secret", required=True, help="a value no page may show")
    args = parser.parse_args()
    console = args.base + "/console"
    os.makedirs(args.shots, exist_ok=True)
    shot = lambda name: os.path.join(args.shots, name)
    report = {}

    headers = {"Authorization": f"Bearer {args.token}"}
    async with async_playwright() as p, streamablehttp_client(
        args.base + "/mcp", headers=headers
    ) as (read, write, _):
        browser = await p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        page = await browser.new_page(viewport={"width": 1360, "height": 820})
        seen_html = []

        async def remember():
            seen_html.append(await page.content())

        # 1-2. The services page shows the fixture service connected.
        await page.goto(console)
        row = page.locator("#service-fx")
        await row.wait_for()
        report["services"] = {
            "url": page.url,
            "fx_state": await row.get_attribute("data-state"),
            "fx_tools": await row.locator("td.tools").inner_text(),
            "fx_catalog": await row.locator("td:nth-child(8)").inner_text(),
        }
        await page.screenshot(path=shot("services.png"), full_page=True)
        await remember()

        # 3. Calls made through an MCP client appear live on the open calls page.
        await page.click("nav >> text=Calls")
        await page.wait_for_selector("body[data-feed=open]")
        rows_before = await page.locator("tr.call").count()
        async with ClientSession(read, write) as session:
            await session.initialize()
            # A call that reports progress for about a second: its row shows it running.
            working = asyncio.create_task(
                call_quietly(session, "mcp__fx__work_with_progress", {"steps": 20})
            )
            running = page.locator(
                "tr.call[data-status=running]",
                has=page.locator("td.progress", has_text="step"),
            ).first
            await running.wait_for(timeout=15000)
            running_progress = await running.locator("td.progress").inner_text()
            worked = await working
            leaked = await call_quietly(session, "mcp__fx__leak_secret", {})
            big = await call_quietly(session, "mcp__fx__big_text", {"size": 150000})
            leak_row = page.locator(
                "tr.call[data-status=ok]", has=page.locator("td.tool", has_text="mcp__fx__leak_secret")
            ).first
            big_row = page.locator(
                "tr.call[data-status=ok]", has=page.locator("td.tool", has_text="mcp__fx__big_text")
            ).first
            await leak_row.wait_for(timeout=15000)
            await big_row.wait_for(timeout=15000)
            report["calls"] = {
                "client_saw_leak": leaked,
                "client_big_is_error": big["is_error"],
                "rows_before": rows_before,
                "running_progress": running_progress,
                "worked": worked,
                "reloaded": False,
                "leak": {
                    "agent": await leak_row.locator("td.agent").inner_text(),
                    "size": await leak_row.locator("td.size").inner_text(),
                    "redacted_badge": await leak_row.locator(".badge.redacted").count(),
                },
                "big": {
                    "size": await big_row.locator("td.size").inner_text(),
                    "redacted_badge": await big_row.locator(".badge.redacted").count(),
                },
            }
            # The page was never reloaded: the rows came over the live feed.
            report["calls"]["reloaded"] = await page.evaluate(
                "performance.getEntriesByType('navigation').length != 1"
            )
            await page.screenshot(path=shot("calls.png"), full_page=True)
            await remember()

            # 4. The large output, paged to its end; the redacted one lists its marks.
            await leak_row.locator("a.output").click()
            await page.wait_for_selector("pre#text")
            report["leak_output"] = {
                "marks": await page.locator("#marks li").all_inner_texts(),
                "text": await page.locator("pre#text").inner_text(),
            }
            await remember()
            await page.go_back()
            await page.wait_for_selector("tr.call")
            await page.locator(
                "tr.call[data-status=ok]", has=page.locator("td.tool", has_text="mcp__fx__big_text")
            ).first.locator("a.output").click()
            await page.wait_for_selector("pre#text")
            await page.screenshot(path=shot("output.png"), full_page=False)
            pages, collected = 1, await page.locator("pre#text").inner_text()
            while await page.locator("#next").count() > 0 and pages < 50:
                await page.click("#next")
                await page.wait_for_selector("pre#text")
                collected += await page.locator("pre#text").inner_text()
                pages += 1
            report["big_output"] = {
                "pages": pages,
                "chars": len(collected),
                "all_x": set(collected) == {"x"},
                "end_shown": await page.locator("#end").count(),
                "range": await page.locator("#range").inner_text(),
            }
            await remember()
            await page.click("text=Save as artifact")
            await page.wait_for_selector("p.flash")
            report["saved"] = await page.locator("p.flash").inner_text()

            # 5. Revoking alice's grant in the console refuses her next call.
            await page.click("nav >> text=Grants & policy")
            cell = page.locator("tr[data-agent=alice] td[data-service=fx]")
            report["grant_before"] = await cell.get_attribute("data-granted")
            await cell.locator("button", has_text="Revoke").click()
            await page.wait_for_selector("p.flash")
            report["revoke_flash"] = await page.locator("p.flash").inner_text()
            report["grant_after"] = await page.locator(
                "tr[data-agent=alice] td[data-service=fx]"
            ).get_attribute("data-granted")
            report["decisions"] = await page.locator("#decisions tbody tr").all_inner_texts()
            await page.screenshot(path=shot("grants.png"), full_page=True)
            await remember()
            report["after_revoke"] = await call_quietly(session, "mcp__fx__echo", {"text": "hi"})

        # The plugins page names each stage's plugin and the limits.
        await page.click("nav >> text=Plugins")
        await page.wait_for_selector("#plugins-fx")
        report["plugins"] = {
            "fx": await page.locator("#plugins-fx tbody tr").all_inner_texts(),
            "limits": await page.locator("#limits").inner_text(),
        }
        await page.screenshot(path=shot("plugins.png"), full_page=True)
        await remember()
        await browser.close()
    report["pages_checked"] = len(seen_html)
    report["secret_seen"] = any(args.secret in html for html in seen_html)
    print(json.dumps(report))


asyncio.run(main())
