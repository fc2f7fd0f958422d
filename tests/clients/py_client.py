#!/usr/bin/env python3
"""Drive an MCP server (or mcpgate) with the official Python SDK (PyPI ``mcp`` 2.x).

Usage:
    .venv/bin/python tests/clients/py_client.py <url> [--tool NAME] [--args JSON]
        [--sse] [--mode legacy|auto] [--no-terminate] [--allow-tool-error]
        [--header 'Name: value']... [--ca FILE]
        [--timeout SECONDS]

Streamable HTTP (default): ``streamable_http_client`` + ``ClientSession``:
initialize -> tools/list -> tools/call -> leave the transport context, which
sends ``DELETE <url>`` with the ``Mcp-Session-Id`` (``terminate_on_close=True``,
the SDK default) -> close.

``--mode legacy`` (default) is the classic ``initialize`` handshake.
``--mode auto`` is what ``mcp.Client(url)`` does by default in the 2.x SDK:
first a ``server/discover`` probe at protocol 2026-07-28 (a POST *without* a
session id), falling back to ``initialize`` when the server rejects it.

``--sse``: legacy HTTP+SSE transport (``sse_client``); no DELETE exists there.

Prints exactly ONE JSON line on stdout:
    {"ok":true,"transport":"streamableHttp"|"sse","sessionId":"...",
     "protocolVersion":"...","serverInfo":{...},"tools":[...],
     "callResult":{...},"terminated":true,"deleteStatus":200,
     "notifications":[...methods received...]}
or, on any failure, {"ok":false,"error":"..."} and exit code 1.
A tool result with isError:true also counts as a failure (ok:false, exit 1,
all the fields above still present) unless --allow-tool-error is given.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from contextlib import AsyncExitStack
from typing import Any

# Nothing but the result line may reach stdout; keep SDK logging quiet on stderr.
logging.basicConfig(stream=sys.stderr, level=logging.ERROR)


def emit(obj: dict[str, Any], code: int) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def describe(exc: BaseException) -> str:
    # anyio task groups wrap failures in ExceptionGroups; report the leaves.
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            emit({"ok": False, "error": f"usage error: {message}"}, 1)

    p = Parser(description="MCP Python SDK test client")
    p.add_argument("url")
    p.add_argument("--tool", default="echo")
    p.add_argument("--args", dest="tool_args", default=None, help="JSON object of tool arguments")
    p.add_argument("--sse", action="store_true", help="use the legacy HTTP+SSE transport")
    p.add_argument("--mode", choices=["legacy", "auto"], default="legacy")
    p.add_argument("--no-terminate", dest="terminate", action="store_false")
    p.add_argument("--allow-tool-error", action="store_true", help="isError tool results still count as ok")
    p.add_argument("--header", action="append", default=[], help="extra HTTP header 'Name: value'")
    p.add_argument("--timeout", type=float, default=30.0, help="overall deadline in seconds")
    p.add_argument("--ca", default=None, help="PEM CA file to verify an https server with (httpx verify)")
    ns = p.parse_args(argv)
    if ns.tool_args is None:
        ns.tool_args = {"message": "hello from py"} if ns.tool == "echo" else {}
    else:
        try:
            ns.tool_args = json.loads(ns.tool_args)
        except json.JSONDecodeError as e:
            emit({"ok": False, "error": f"--args is not valid JSON: {e}"}, 1)
        if not isinstance(ns.tool_args, dict):
            emit({"ok": False, "error": "--args must be a JSON object"}, 1)
    headers: dict[str, str] = {}
    for h in ns.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            emit({"ok": False, "error": f"--header must look like 'Name: value', got {h!r}"}, 1)
        headers[name.strip()] = value.strip()
    ns.headers = headers
    return ns


async def run(ns: argparse.Namespace) -> dict[str, Any]:
    import anyio
    import httpx2
    from mcp.client._probe import negotiate_auto
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    wire: dict[str, Any] = {"session_id": None, "delete_status": None}

    async def on_response(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid:
            wire["session_id"] = sid
        if response.request.method == "DELETE":
            wire["delete_status"] = response.status_code

    async def on_request(request: httpx2.Request) -> None:
        # Legacy SSE: the session id travels in the POST endpoint's query string.
        if request.method == "POST" and ns.sse:
            sid = request.url.params.get("sessionId") or request.url.params.get("session_id")
            if sid:
                wire["session_id"] = sid

    hooks = {"request": [on_request], "response": [on_response]}

    notifications: list[str] = []

    async def message_handler(message: Any) -> None:
        # Server notifications arrive as mcp.types.ServerNotification-ish models.
        method = getattr(message, "method", None)
        root = getattr(message, "root", None)
        if method is None and root is not None:
            method = getattr(root, "method", None)
        if isinstance(method, str):
            notifications.append(method)

    def http_client_factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        merged = {**(headers or {}), **ns.headers}
        if ns.ca:
            import ssl

            client = httpx2.AsyncClient(
                headers=merged,
                timeout=timeout or httpx2.Timeout(30.0, read=300.0),
                verify=ssl.create_default_context(cafile=ns.ca),
            )
        else:
            client = create_mcp_http_client(headers=merged, timeout=timeout, auth=auth)
        client.event_hooks = hooks
        return client

    result: dict[str, Any] = {}
    with anyio.fail_after(ns.timeout):
        async with AsyncExitStack() as stack:
            if ns.sse:
                transport_cm = sse_client(ns.url, httpx_client_factory=http_client_factory)
            else:
                # We own this client (the SDK only closes clients it created itself).
                http_client = await stack.enter_async_context(http_client_factory())
                transport_cm = streamable_http_client(ns.url, http_client=http_client, terminate_on_close=ns.terminate)
            read_stream, write_stream = await stack.enter_async_context(transport_cm)
            async with ClientSession(read_stream, write_stream, message_handler=message_handler) as session:
                if ns.mode == "auto":
                    await negotiate_auto(session)
                else:
                    await session.initialize()
                result["protocolVersion"] = session.protocol_version
                info = session.server_info
                result["serverInfo"] = info.model_dump(mode="json", by_alias=True, exclude_none=True) if info else None
                listed = await session.list_tools()
                result["tools"] = [t.name for t in listed.tools]
                call = await session.call_tool(ns.tool, ns.tool_args)
                result["callResult"] = call.model_dump(mode="json", by_alias=True, exclude_none=True)
            # Unwinding the stack leaves streamable_http_client, which sends the
            # DELETE (terminate_on_close) before the http client is closed.

    ds = wire["delete_status"]
    out: dict[str, Any] = {
        "ok": True,
        "transport": "sse" if ns.sse else "streamableHttp",
        "sessionId": wire["session_id"],
        "protocolVersion": result["protocolVersion"],
        "serverInfo": result["serverInfo"],
        "tools": result["tools"],
        "callResult": result["callResult"],
        "terminated": ds is not None and 200 <= ds < 300,
        "deleteStatus": ds,
        "notifications": notifications,
    }
    if result["callResult"].get("isError") and not ns.allow_tool_error:
        out["ok"] = False
        out["error"] = f"tool {ns.tool} returned isError"
    return out


def main() -> None:
    ns = parse_args(sys.argv[1:])
    try:
        import anyio

        out = anyio.run(run, ns)
    except BaseException as e:  # noqa: BLE001 - report everything as the contract's error line
        if isinstance(e, SystemExit):
            raise
        if isinstance(e, TimeoutError) and not str(e):
            emit({"ok": False, "error": f"TimeoutError: timed out after {ns.timeout} s"}, 1)
        emit({"ok": False, "error": describe(e)}, 1)
    emit(out, 0 if out["ok"] else 1)


if __name__ == "__main__":
    main()
