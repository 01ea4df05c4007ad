import assert from "node:assert/strict";
import {
  findModel,
  formField,
  modelValueSpan,
  multipartBoundary,
  renameModel,
} from "./model_of.ts";

const enc = new TextEncoder();

Deno.test("the model comes from the JSON body, else X-Model, else a multipart field", () => {
  const json = '{"model":"a","stream":true}';
  assert.deepEqual(findModel(json, enc.encode(json), {}), {
    model: "a",
    source: "json",
    stream: true,
    fields: { model: "a", stream: true },
  });
  const found = findModel("raw text", enc.encode("raw text"), {
    "x-model": "b",
  });
  assert.equal("model" in found && found.model, "b");
  const form = '--XY\r\nContent-Disposition: form-data; name="file"; ' +
    'filename="a.wav"\r\n\r\nmodel\r\n--XY\r\nContent-Disposition: form-data; ' +
    'name="model"\r\n\r\nwhisper-1\r\n--XY--\r\n';
  const m = findModel(null, enc.encode(form), {
    "content-type": "multipart/form-data; boundary=XY",
  });
  assert.equal("model" in m && m.model, "whisper-1");
  const none = findModel("{}", enc.encode("{}"), {});
  assert.equal("code" in none && none.code, "model_required");
});

Deno.test("an alias changes only the model's bytes in JSON and multipart bodies", () => {
  const json =
    '{ "input" : {"model":"x"}, "model" : "alias", "n": [1,"model"] }';
  const span = modelValueSpan(json)!;
  assert.equal(json.slice(span.start, span.end), '"alias"');
  assert.equal(
    renameModel(Buffer.from(json), json, "json", "tgt", null).toString(),
    json.replace('"alias"', '"tgt"'),
  );
  const file = Buffer.from([0xff, 0x00, 0xfe, 0x0d, 0x0a]);
  const form = Buffer.concat([
    Buffer.from('--B\r\nContent-Disposition: form-data; name="model"\r\n\r\n'),
    Buffer.from("alias\r\n--B\r\nContent-Disposition: form-data; "),
    Buffer.from('name="file"; filename="f"\r\n\r\n'),
    file,
    Buffer.from("\r\n--B--\r\n"),
  ]);
  const out = renameModel(form, null, "multipart", "tgt", "B");
  assert.equal(formField(out, "B", "model")?.value, "tgt");
  assert.deepEqual(out.subarray(out.length - 14, out.length - 9), file);
  assert.equal(multipartBoundary('multipart/form-data; boundary="q q"'), "q q");
});

Deno.test("one model rule for every route: the inference routes read the body strictly, forwarded paths leniently", () => {
  const find = (text: string, strict: boolean, headers = {}) =>
    findModel(text, enc.encode(text), headers, strict);
  // Strict: a body that is not a JSON object, or a non-boolean stream, is refused.
  assert.equal(
    (find("not json", true) as { code: string }).code,
    "invalid_json",
  );
  assert.equal((find("[1]", true) as { code: string }).code, "invalid_body");
  assert.equal(
    (find('{"model":"m","stream":"yes"}', true) as { code: string }).code,
    "invalid_stream",
  );
  // Lenient: such a body names nothing, and X-Model still can.
  assert.equal(
    (find("not json", false, { "x-model": "m" }) as { model: string }).model,
    "m",
  );
  // Both: the JSON model first, then X-Model.
  for (const strict of [true, false]) {
    assert.equal(
      (find('{"model":"a"}', strict) as { model: string }).model,
      "a",
    );
    assert.equal(
      (find("{}", strict, { "x-model": "b" }) as { source: string }).source,
      "header",
    );
  }
});
