#!/usr/bin/env python3
"""Drive a virtual server through mcpgate with the official Python SDK (PyPI ``mcp`` 2.x).

Usage: .venv/bin/python tests/clients/virtual_client.py <url> <fs-dir>

The same contract as ``virtual_client.mjs`` (members ``ev``, ``fs``, ``kit``): declares
sampling and roots (one root, <fs-dir>), lists the merged catalogue, calls a tool of each
member with progress and logs counted, reads a resource of ``ev`` and ``kit``, gets a
prompt of each, answers sampling and roots requests the members raise, and leaves the
transport (DELETE). Prints ONE JSON line, ``{"ok": true, ...}`` or ``{"ok": false,
"error": ...}`` with exit code 1.
"""

from __future__ import annotations

import json
import logging
import pathlib
import sys
from typing import Any

logging.basicConfig(stream=sys.stderr, level=logging.ERROR)


def emit(obj: dict[str, Any], code: int) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def run(url: str, fs_dir: str) -> dict[str, Any]:
    import anyio
    from mcp import types
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    out: dict[str, Any] = {"calls": {}, "progress": {}, "logs": [], "reads": {}, "prompted": {}, "sampled": [], "rootsAsked": 0}
    statuses: dict[str, int] = {}

    async def on_response(response: Any) -> None:
        if response.request.method == "DELETE":
            statuses["delete"] = response.status_code

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        first = params.messages[0].content if params.messages else None
        out["sampled"].append(getattr(first, "text", repr(first)))
        return types.CreateMessageResult(
            role="assistant", model="test-model", content=types.TextContent(type="text", text="sampled by py")
        )

    async def roots(context: Any) -> types.ListRootsResult:
        out["rootsAsked"] += 1
        return types.ListRootsResult(roots=[types.Root(uri=pathlib.Path(fs_dir).as_uri(), name="fs-dir")])

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        out["logs"].append({"logger": params.logger, "data": params.data})

    with anyio.fail_after(60):
        async with create_mcp_http_client() as http:
            http.event_hooks = {"request": [], "response": [on_response]}
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(
                    read, write, sampling_callback=sampling, list_roots_callback=roots, logging_callback=on_log
                ) as s:
                    init = await s.initialize()
                    out["serverInfo"] = init.server_info.model_dump(mode="json", by_alias=True, exclude_none=True)
                    out["tools"] = [t.name for t in (await s.list_tools()).tools]
                    out["prompts"] = [p.name for p in (await s.list_prompts()).prompts]
                    out["resources"] = [str(r.uri) for r in (await s.list_resources()).resources]
                    out["templates"] = [t.uri_template for t in (await s.list_resource_templates()).resource_templates]

                    async def call(name: str, args: dict[str, Any]) -> None:
                        seen = {"n": 0}

                        async def progress(p: float, total: float | None, message: str | None) -> None:
                            seen["n"] += 1

                        r = await s.call_tool(name, args, progress_callback=progress)
                        out["calls"][name] = text_of(r)
                        out["progress"][name] = seen["n"]

                    await call("ev__echo", {"message": "to ev"})
                    await call("fs__read_text_file", {"path": f"{fs_dir}/a.txt"})
                    await call("kit__echo", {"text": "to kit"})
                    await call("kit__notify", {"tag": "kit-logs", "count": 3})
                    await call("ev__trigger-long-running-operation", {"duration": 1, "steps": 4})
                    await call("ev__trigger-sampling-request", {"prompt": "ev asks", "maxTokens": 10})
                    await call("kit__sample", {"prompt": "kit asks"})
                    await call("ev__get-roots-list", {})
                    await call("kit__roots", {})
                    for uri in ["ev+demo://resource/static/document/architecture.md", "kit+test://static"]:
                        r = await s.read_resource(uri)
                        c = r.contents[0]
                        out["reads"][uri] = {"uri": str(c.uri), "text": (getattr(c, "text", "") or "")[:80]}
                    for name, args in [("ev__simple-prompt", {}), ("kit__greet", {"name": "py"})]:
                        r = await s.get_prompt(name, args)
                        c = r.messages[0].content
                        out["prompted"][name] = getattr(c, "text", repr(c))
    out["deleted"] = statuses.get("delete") == 200
    return out


def main() -> None:
    if len(sys.argv) != 3:
        emit({"ok": False, "error": "usage: virtual_client.py <url> <fs-dir>"}, 1)
    try:
        import anyio

        out = anyio.run(run, sys.argv[1], sys.argv[2])
    except BaseException as e:  # noqa: BLE001 - the contract's error line
        if isinstance(e, SystemExit):
            raise
        emit({"ok": False, "error": describe(e)}, 1)
    emit({"ok": True, **out}, 0)


if __name__ == "__main__":
    main()
