// The TypeScript SDK's ACP client, driving `nanohermes acp` for the tests: it starts the agent
// (the command after the workspace), answers permission requests with "allow once", serves
// fs/read_text_file and fs/write_text_file from the disk, and prints one JSON object of what
// it saw: the answers to initialize, session/new and session/prompt, every session update,
// the permission requests, the files read and written, and the agent's exit status.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [, , workspace, command, ...args] = process.argv;
const agent = spawn(command, args, { cwd: workspace, stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const seen = { updates: [], asked: [], reads: [], writes: [] };

const app = acp
  .client({ name: "nanohermes-tests" })
  .onNotification("session/update", async ({ params }) => {
    seen.updates.push(params.update);
  })
  .onRequest("session/request_permission", async ({ params }) => {
    seen.asked.push(params);
    const option = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onRequest("fs/read_text_file", async ({ params }) => {
    seen.reads.push(params.path);
    return { content: readFileSync(params.path, "utf8") };
  })
  .onRequest("fs/write_text_file", async ({ params }) => {
    seen.writes.push(params.path);
    writeFileSync(params.path, params.content);
    return {};
  });

const answers = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
  });
  const session = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
  const prompt = await ctx.request("session/prompt", {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "fix the greeting" }],
  });
  return { init, session, prompt };
});
agent.stdin.end();
const code = await new Promise((resolve) => agent.on("exit", (c) => resolve(c)));
process.stdout.write(JSON.stringify({ ...answers, ...seen, code }) + "\n");
