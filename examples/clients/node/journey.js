// A whole 3D journey through idgate, from Node.js: the quickstart.
//
// Creates a journey, runs a 3D liveness proof, submits an RG (front and
// back), and watches the journey until its result, as an onboarding
// service would. Along the way it shows the error model of docs/api.md:
//
// - every error is a google.rpc.Status in the `grpc-status-details-bin`
//   trailer; `ErrorInfo.reason` says what happened (here
//   DOCUMENT_UNUSABLE, on a first photo with no document in it: the appkey
//   stays usable, so the program sends the document again);
// - a `RetryInfo` detail means a retry is safe after its delay; without
//   one, the program does not retry. CreateJourney carries a `request_id`,
//   so a retry never opens a second journey.
//
// Run it against `cargo run --release -- serve` (the embedded sandbox):
//
//     npm ci && node journey.js
//
// Environment: IDGATE_GATEWAY (host:port, default 127.0.0.1:50051);
// IDGATE_TOKEN, a bearer token sent as `authorization: Bearer ...` (unset:
// none, for a gateway that runs open); IDGATE_PROTO, the directory of the
// idgate proto files (default: the repository's proto/).

"use strict";

const crypto = require("node:crypto");
const path = require("node:path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const protobuf = require("protobufjs");

const GATEWAY = process.env.IDGATE_GATEWAY || "127.0.0.1:50051";
const TOKEN = process.env.IDGATE_TOKEN;
const PROTO = process.env.IDGATE_PROTO || path.resolve(__dirname, "../../../proto");
// A deadline for each unary call, and for the whole watch.
const CALL_TIMEOUT_MS = 30_000;
const WATCH_TIMEOUT_MS = 120_000;
const MAX_ATTEMPTS = 5;

// The sandbox's test person whose registry check is positive (docs/sandbox.md).
const PERSON = {
  cpf: "521.100.001-39",
  name: "Ana Positiva Souza",
  birth_date: "1985-03-14",
  customer_reference: "QUICKSTARTNODE",
};

// An 8x8 grey JPEG after its start marker; the sandbox reads a document
// from an ASCII marker in a COM segment placed before it (docs/sandbox.md).
const JPEG_BODY = Buffer.from(
  "/9sAQwABAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEB" +
    "/8AACwgACAAIAQERAP/EABQAAQAAAAAAAAAAAAAAAAAAAAD/xAAUEAEAAAAAAAAAAAAAAAAAAAAA/9oACAEBAAA/AD//2Q==",
  "base64",
);

// A tiny JPEG; with `marker`, one the sandbox reads as that document.
function sandboxJpeg(marker) {
  if (!marker) return Buffer.concat([Buffer.from([0xff, 0xd8]), JPEG_BODY]);
  const text = Buffer.from(marker + "\n", "ascii");
  const length = Buffer.alloc(2);
  length.writeUInt16BE(text.length + 2);
  return Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xfe]), length, text, JPEG_BODY]);
}

// google.rpc.Status and the two details this program reads, as
// googleapis' google/rpc/status.proto and error_details.proto declare them.
const rpc = (() => {
  const root = protobuf.parse(`
    syntax = "proto3";
    package google.rpc;
    import "google/protobuf/any.proto";
    import "google/protobuf/duration.proto";
    message Status { int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3; }
    message ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
    message RetryInfo { google.protobuf.Duration retry_delay = 1; }
  `, { keepCase: true }).root;
  for (const file of ["google/protobuf/any.proto", "google/protobuf/duration.proto"]) {
    root.addJSON(protobuf.common.get(file).nested);
  }
  root.resolveAll();
  const type = (name) => root.lookupType(`google.rpc.${name}`);
  return { Status: type("Status"), ErrorInfo: type("ErrorInfo"), RetryInfo: type("RetryInfo") };
})();

// The ErrorInfo and RetryInfo of a failed call (null when absent).
function details(err) {
  const found = { info: null, retry: null };
  const bin = err.metadata && err.metadata.get("grpc-status-details-bin")[0];
  if (!bin) return found;
  const read = (type, bytes) => type.toObject(type.decode(bytes), { longs: Number, defaults: true });
  for (const any of rpc.Status.decode(bin).details) {
    if (any.type_url.endsWith("/google.rpc.ErrorInfo")) found.info = read(rpc.ErrorInfo, any.value);
    if (any.type_url.endsWith("/google.rpc.RetryInfo")) found.retry = read(rpc.RetryInfo, any.value);
  }
  return found;
}

function metadata() {
  const md = new grpc.Metadata();
  if (TOKEN) md.set("authorization", `Bearer ${TOKEN}`);
  return md;
}

function codeName(code) {
  return Object.keys(grpc.status).find((k) => grpc.status[k] === code) || String(code);
}

// `client[method](request)`, retried only when the error carries RetryInfo.
async function call(client, method, request) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await new Promise((resolve, reject) =>
        client[method](request, metadata(), { deadline: Date.now() + CALL_TIMEOUT_MS }, (err, res) =>
          err ? reject(err) : resolve(res),
        ),
      );
    } catch (err) {
      const { info, retry } = details(err);
      if (!retry || attempt === MAX_ATTEMPTS) throw err;
      const delay = retry.retry_delay || { seconds: 0, nanos: 0 };
      const ms = delay.seconds * 1000 + Math.floor(delay.nanos / 1e6);
      const reason = info ? info.reason : "no ErrorInfo";
      console.log(
        `    ${method} failed with ${codeName(err.code)} / ${reason}; RetryInfo says retry after ${ms / 1000}s: retrying`,
      );
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
  }
}

async function main() {
  const definition = protoLoader.loadSync(
    ["idgate/v1/journey.proto", "idgate/v1/liveness.proto", "idgate/v1/document.proto"],
    { includeDirs: [PROTO], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true },
  );
  const v1 = grpc.loadPackageDefinition(definition).idgate.v1;
  const credentials = grpc.credentials.createInsecure();
  const journeys = new v1.JourneyService(GATEWAY, credentials);
  const liveness = new v1.LivenessService(GATEWAY, credentials);
  const documents = new v1.DocumentService(GATEWAY, credentials);

  // 1. A journey; the request_id makes a retry safe (docs/guard.md).
  const created = await call(journeys, "CreateJourney", { ...PERSON, request_id: crypto.randomUUID() });
  const appkey = created.appkey;
  const expires = new Date(Number(created.expire_time.seconds) * 1000).toISOString();
  console.log(`[1] journey ${created.journey_ref} created; appkey expires at ${expires}`);

  // 2. 3D liveness: a session for the front-end SDK, then its verification
  //    on the channel that issued it.
  const session = await call(liveness, "StartSession3D", {
    appkey,
    user_agent: "idgate-quickstart-node/1",
  });
  const { verdict } = await call(liveness, "VerifyLiveness3D", {
    appkey,
    session_token: session.session_token,
    channel: session.channel,
  });
  console.log(`[2] 3D liveness on channel ${session.channel}: valid=${verdict.valid} code=${verdict.code}`);

  // 3. The document. The first photo has no document in it: the gateway
  //    answers DOCUMENT_UNUSABLE and the appkey stays usable.
  const photos = [
    [sandboxJpeg()],
    [sandboxJpeg("IDGATE-SANDBOX:rg-front"), sandboxJpeg("IDGATE-SANDBOX:rg-back")],
  ];
  let submitted = null;
  for (const images of photos) {
    try {
      submitted = await call(documents, "SubmitDocumentImages", {
        appkey,
        images: images.map((content) => ({ content })),
      });
      break;
    } catch (err) {
      const { info } = details(err);
      if (!info || info.reason !== "DOCUMENT_UNUSABLE") throw err;
      console.log(
        `[3] ${codeName(err.code)} / ${info.reason}: no document in the photo; taking the RG front and back again`,
      );
    }
  }
  if (!submitted) throw new Error("the document was refused every time");
  console.log(`[3] document accepted: code ${submitted.document_code}`);

  // 4. Watch the journey until its result (status changes, then the
  //    result on the last message).
  const stream = journeys.WatchJourney({ journey_ref: created.journey_ref }, metadata(), {
    deadline: Date.now() + WATCH_TIMEOUT_MS,
  });
  let last = null;
  for await (const event of stream) {
    console.log(`[4] status ${event.raw_status} (${event.status})`);
    last = event;
  }
  if (!last || !last.result) throw new Error("the watch ended without a result");
  console.log(`journey ${created.journey_ref} finished: ${last.result.raw_status}`);
  return last.result.status === "JOURNEY_STATUS_COMPLETE" ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    const { info } = details(err);
    console.error(`failed: ${err.message}${info ? ` (${info.reason})` : ""}`);
    process.exit(1);
  },
);
