"""MCP test client on the official Python SDK mcp 2.3.0 (mcp.Client); same contract as ts_client.mjs.

    .venv/bin/python py_client.py [options] <url>
    .venv/bin/python py_client.py [options] --stdio CMD [ARGS...]   (everything after --stdio is the command)
options: --mode auto|pin|legacy   (default auto = the SDK default; pin = mode "2026-07-28", no probe)
         --header 'K: V'          (repeatable, HTTP only)
         --elicit ANSWER          also call `ask`, answering the elicitation with ANSWER
         --sample                 also call `sample`, answering sampling/createMessage
         --everything / --tour    against the everything server (see ts_client.mjs)

Prints ONE JSON line on stdout:
{ok, era, protocolVersion, serverInfo, tools, notify:{text, progress, logs, duplicates}, resource, whoami, prompt,
 elicit, sample, error?}. Exit 0 iff ok.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

MODERN = "2026-07-28"
USAGE = "usage: py_client.py [--mode auto|pin|legacy] [--header 'K: V']... [--elicit A] [--sample] <url> | --stdio CMD..."


def parse(argv: list[str]) -> dict[str, Any]:
    o: dict[str, Any] = {"mode": "auto", "target": None, "stdio": None, "headers": {}, "elicit": None, "sample": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--mode":
            i += 1
            o["mode"] = argv[i]
        elif a == "--header":
            i += 1
            k, _, v = argv[i].partition(":")
            o["headers"][k.strip()] = v.strip()
        elif a == "--elicit":
            i += 1
            o["elicit"] = argv[i]
        elif a == "--sample":
            o["sample"] = True
        elif a == "--everything":
            o["everything"] = True
        elif a == "--tour":
            o["tour"] = True
        elif a == "--stdio":
            o["stdio"] = argv[i + 1 :]
            break
        else:
            o["target"] = a
        i += 1
    if o["mode"] not in ("auto", "pin", "legacy") or not (o["target"] or o["stdio"]):
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    return o


def first_text(content: list[Any]) -> str | None:
    return next((c.text for c in content if isinstance(c, types.TextContent)), None)


async def run(o: dict[str, Any], out: dict[str, Any]) -> None:
    log_seqs: list[int] = []
    progress: list[float] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        out["all_logs"] = out.get("all_logs", 0) + 1
        if isinstance(params.data, dict) and params.data.get("tag") == "t1":
            log_seqs.append(params.data.get("seq"))

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": o["elicit"], "name": o["elicit"]})

    async def on_sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        last = params.messages[-1].content
        said = last.text if isinstance(last, types.TextContent) else ""
        return types.CreateMessageResult(
            role="assistant", model="mcpgate-test-model", stop_reason="endTurn",
            content=types.TextContent(type="text", text=f"sampled: {said}"),
        )

    if o["stdio"]:
        server: Any = StdioServerParameters(command=o["stdio"][0], args=o["stdio"][1:])
    elif o["headers"]:
        server = streamable_http_client(o["target"], http_client=create_mcp_http_client(headers=o["headers"]))
    else:
        server = o["target"]
    kwargs: dict[str, Any] = {}
    if o["elicit"] is not None:
        kwargs["elicitation_callback"] = on_elicit
    if o["sample"]:
        kwargs["sampling_callback"] = on_sample
    mode = MODERN if o["mode"] == "pin" else o["mode"]
    async with Client(
        server, mode=mode, logging_callback=on_log, log_level="debug",  # log_level: 2026-07-28 opt-in
        client_info=types.Implementation(name="mcpgate-modern-py-client", version="2.3.0"), **kwargs,
    ) as client:
        out["protocolVersion"] = client.protocol_version
        out["era"] = "modern" if (client.protocol_version or "") >= MODERN else "legacy"
        info = client.server_info
        out["serverInfo"] = info.model_dump(exclude_none=True) if info else None
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        if o.get("everything"):
            e = await client.call_tool("echo", {"message": "from py"})
            out["echo"] = first_text(e.content)
            return
        if o.get("tour"):
            out["echo"] = first_text((await client.call_tool("echo", {"message": "from py"})).content)
            lr = await client.call_tool(
                "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress
            )
            out["long"] = {"text": first_text(lr.content), "progress": list(progress)}
            res = await client.read_resource("demo://resource/dynamic/text/1")
            out["resource"] = next((c.text for c in res.contents if isinstance(c, types.TextResourceContents)), None)
            p = await client.get_prompt("simple-prompt", {})
            c = p.messages[0].content if p.messages else None
            out["prompt"] = c.text if isinstance(c, types.TextContent) else None
            # Simulated logging logs at once (over HTTP racing the call's answer), then every
            # 5 s: a 5.5 s call gets at least the second (log_level="debug" is on every request).
            before = out.get("all_logs", 0)
            await client.call_tool("toggle-simulated-logging", {})
            await client.call_tool("trigger-long-running-operation", {"duration": 5.5, "steps": 1})
            out["logs"] = out.get("all_logs", 0) - before
            await client.call_tool("toggle-simulated-logging", {})
            if o["elicit"] is not None:
                a = await client.call_tool("trigger-elicitation-request", {})
                out["elicit"] = "\n".join(c.text for c in a.content if isinstance(c, types.TextContent))
            if o["sample"]:
                s = await client.call_tool("trigger-sampling-request", {"prompt": "say hi"})
                out["sample"] = first_text(s.content)
            return

        r = await client.call_tool("notify", {"tag": "t1", "count": 5}, progress_callback=on_progress)
        dup = (len(progress) - len(set(progress))) + (len(log_seqs) - len(set(log_seqs)))
        out["notify"] = {"text": first_text(r.content), "progress": len(progress), "logs": len(log_seqs), "duplicates": dup}

        res = await client.read_resource("test://static")
        out["resource"] = next((c.text for c in res.contents if isinstance(c, types.TextResourceContents)), None)
        if "whoami" in out["tools"]:
            out["whoami"] = first_text((await client.call_tool("whoami", {})).content)
        # A pinned client skips server/discover, so it knows no capabilities: try the prompt anyway.
        if client.server_capabilities.prompts is not None or o["mode"] == "pin":
            p = await client.get_prompt("greet", {"name": "mcpgate"})
            c = p.messages[0].content if p.messages else None
            out["prompt"] = c.text if isinstance(c, types.TextContent) else None
        if o["elicit"] is not None:
            a = await client.call_tool("ask", {"question": "What is the answer?"})
            out["elicit"] = {"error": first_text(a.content)} if a.is_error else first_text(a.content)
        if o["sample"]:
            s = await client.call_tool("sample", {"prompt": "say hi"})
            out["sample"] = {"error": first_text(s.content)} if s.is_error else first_text(s.content)


def main() -> None:
    o = parse(sys.argv[1:])
    out: dict[str, Any] = {"ok": False, "era": None, "protocolVersion": None, "serverInfo": None, "tools": [],
                           "notify": None, "resource": None, "whoami": None, "prompt": None, "elicit": None, "sample": None}
    try:
        anyio.run(run, o, out)
        if o.get("tour"):
            out["ok"] = (
                out.get("echo") == "Echo: from py"
                and len((out.get("long") or {}).get("progress", [])) == 3
                and (out["resource"] or "").startswith("Resource 1:")
                and out["prompt"] == "This is a simple prompt without arguments."
                and out.get("logs", 0) >= 1
                and (o["elicit"] is None or o["elicit"] in (out["elicit"] or ""))
                and (not o["sample"] or "sampled: " in (out["sample"] or ""))
            )
        else:
            out["ok"] = out.get("echo") == "Echo: from py" if o.get("everything") else (
                (out["notify"] or {}).get("text") == "t1:5" and out["resource"] == "static resource"
                and (o["elicit"] is None or out["elicit"] == o["elicit"])
                and (not o["sample"] or out["sample"] == "sampled: say hi")
            )
        if not out["ok"]:
            out["error"] = "unexpected result"
    except BaseException as e:  # noqa: BLE001 - report anything, including ExceptionGroups
        while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
            e = e.exceptions[0]
        out["error"] = f"{type(e).__name__}: {e}"
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    sys.exit(0 if out["ok"] else 1)


if __name__ == "__main__":
    main()
