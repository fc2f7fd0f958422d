"""MCP test server on the official Python SDK mcp 2.3.0 (MCPServer), for mcpgate's 2026-07-28 tests.

Dual-era always (the SDK has no switch to turn either era off): 2026-07-28 and 2025-11-25 clients.

    .venv/bin/python py_server.py [http] [--port N]   Streamable HTTP on 127.0.0.1:N/mcp (legacy leg: sessions)
    .venv/bin/python py_server.py stdio               stdio (the first request fixes the era)

HTTP prints `MODERN_SERVER_READY url=http://127.0.0.1:PORT/mcp` on stderr once listening.
Same surface as ts_server.mjs: tools echo, notify, counter, ask, sample, whoami, touch, add_tool;
resources test://static, test://counter; prompt greet.
"""

from __future__ import annotations

import socket
import sys
import warnings
from typing import Annotated

import anyio
from pydantic import BaseModel

from mcp import MCPDeprecationWarning, types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Elicit, Resolve, Sample

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # ctx.log is deprecated in 2026-07-28

MODERN = "2026-07-28"
mcp = MCPServer("mcpgate-modern-py-server", version="2.3.0", log_level="WARNING")
state = {"counter": 0}


def is_modern(ctx: Context) -> bool:
    return (ctx.protocol_version or "") >= MODERN


@mcp.tool(description="Echo text")
def echo(text: str) -> str:
    return text


@mcp.tool(description="Send `count` progress (if a progressToken was given) and `count` log notifications")
async def notify(tag: str, count: int, ctx: Context) -> str:
    for seq in range(1, count + 1):
        await ctx.report_progress(seq, total=count)  # no-op without a progressToken
        await ctx.log("info", {"tag": tag, "seq": seq})  # 2026-07-28: only if the request carried a logLevel
    await anyio.sleep(0.02)  # see ts_server.mjs: the TS client drops progress read together with the result
    return f"{tag}:{count}"


@mcp.tool(name="counter", description="Increment and return a process-wide counter")
def counter_tool() -> str:
    state["counter"] += 1
    return str(state["counter"])


class Answer(BaseModel):
    answer: str


async def ask_user(question: str) -> Elicit[Answer]:
    return Elicit(question, Answer)


@mcp.tool(description="Ask the user (elicitation) and return the answer")
async def ask(question: str, reply: Annotated[Answer, Resolve(ask_user)]) -> str:
    # 2026-07-28: InputRequiredResult + retry; 2025 era: a real elicitation/create request.
    return reply.answer


async def sample_llm(prompt: str) -> Sample:
    return Sample([types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))], max_tokens=64)


@mcp.tool(description="Ask the client to sample an LLM; return its text")
async def sample(prompt: str, result: Annotated[types.CreateMessageResult, Resolve(sample_llm)]) -> str:
    content = result.content
    return content.text if isinstance(content, types.TextContent) else str(content)


@mcp.tool(description='The caller as seen in request headers, else "anonymous"')
def whoami(ctx: Context) -> str:
    headers = ctx.headers or {}
    if headers.get("authorization"):
        return f"authorization:{headers['authorization']}"
    if headers.get("x-user"):
        return f"x-user:{headers['x-user']}"
    return "anonymous"


@mcp.tool(description="Emit notifications/resources/updated for uri")
async def touch(uri: str, ctx: Context) -> str:
    await ctx.notify_resource_updated(uri)  # subscriptions/listen streams (2026-07-28)
    return f"touched {uri}"


@mcp.tool(description="Register a new tool at runtime (tools list_changed)")
async def add_tool(name: str, ctx: Context) -> str:
    if name in {t.name for t in await mcp.list_tools()}:
        return f"exists {name}"

    def added() -> str:
        return f"{name} called"

    mcp.add_tool(added, name=name, description="Added at runtime by add_tool")
    await ctx.notify_tools_changed()  # subscriptions/listen streams (2026-07-28)
    if not is_modern(ctx):
        await ctx.session.send_tool_list_changed()  # this 2025 session only
    return f"added {name}"


@mcp.resource("test://static", name="static", mime_type="text/plain")
def static_resource() -> str:
    return "static resource"


@mcp.resource("test://counter", name="counter", mime_type="text/plain", description="The counter tool value")
def counter_resource() -> str:
    return str(state["counter"])


@mcp.prompt(description="Greet someone")
def greet(name: str) -> str:
    return f"Hello, {name}!"


async def serve_http(port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    app = mcp.streamable_http_app(host="127.0.0.1")  # /mcp; host => DNS-rebinding protection for localhost
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.02)
        print(f"MODERN_SERVER_READY url=http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["stdio"]:
        mcp.run()
        return
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 0
    anyio.run(serve_http, port)


if __name__ == "__main__":
    main()
