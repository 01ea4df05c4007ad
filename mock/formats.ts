// Response shapes of the four inference APIs the relay forwards, as plain string
// builders. Each stream is split into `head` events (sent at once), one event per
// word (sent with the per-chunk delay) and `tail` events (sent after the last word).

export type Api = "chat" | "completions" | "responses" | "messages";

export type Answer = {
  id: string;
  model: string;
  words: string[];
  promptTokens: number;
  createdSecs: number;
  /** OpenAI chat only: add a usage chunk before [DONE] (`stream_options.include_usage`). */
  includeUsage: boolean;
};

export type StreamEvents = {
  head: string[];
  perWord: string[];
  tail: string[];
};

/** What every OpenAI object of `answer` begins with, in OpenAI's order. */
function openaiHead(answer: Answer, object: string) {
  return {
    id: answer.id,
    object,
    created: answer.createdSecs,
    model: answer.model,
  };
}

function sseData(value: unknown): string {
  return `data: ${JSON.stringify(value)}\n\n`;
}

function sseEvent(name: string, value: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(value)}\n\n`;
}

function text(answer: Answer): string {
  return answer.words.join("");
}

function openAiUsage(answer: Answer) {
  const completion = answer.words.length;
  return {
    prompt_tokens: answer.promptTokens,
    completion_tokens: completion,
    total_tokens: answer.promptTokens + completion,
  };
}

function chatChunk(
  answer: Answer,
  delta: object,
  finish: string | null,
): string {
  return sseData({
    ...openaiHead(answer, "chat.completion.chunk"),
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
}

function chatStream(answer: Answer): StreamEvents {
  const head = [chatChunk(answer, { role: "assistant", content: "" }, null)];
  const perWord = answer.words.map((w) =>
    chatChunk(answer, { content: w }, null)
  );
  const tail = [chatChunk(answer, {}, "stop")];
  if (answer.includeUsage) {
    tail.push(sseData({
      ...openaiHead(answer, "chat.completion.chunk"),
      choices: [],
      usage: openAiUsage(answer),
    }));
  }
  tail.push("data: [DONE]\n\n");
  return { head, perWord, tail };
}

function chatBody(answer: Answer): unknown {
  return {
    ...openaiHead(answer, "chat.completion"),
    choices: [{
      index: 0,
      message: { role: "assistant", content: text(answer) },
      logprobs: null,
      finish_reason: "stop",
    }],
    usage: openAiUsage(answer),
  };
}

function completionChunk(
  answer: Answer,
  piece: string,
  finish: string | null,
): string {
  return sseData({
    ...openaiHead(answer, "text_completion"),
    choices: [{ index: 0, text: piece, logprobs: null, finish_reason: finish }],
  });
}

function completionsStream(answer: Answer): StreamEvents {
  return {
    head: [],
    perWord: answer.words.map((w) => completionChunk(answer, w, null)),
    tail: [completionChunk(answer, "", "stop"), "data: [DONE]\n\n"],
  };
}

function completionsBody(answer: Answer): unknown {
  return {
    ...openaiHead(answer, "text_completion"),
    choices: [{
      index: 0,
      text: text(answer),
      logprobs: null,
      finish_reason: "stop",
    }],
    usage: openAiUsage(answer),
  };
}

// ---- OpenAI Responses API -------------------------------------------------

function responsesUsage(answer: Answer) {
  const output = answer.words.length;
  return {
    input_tokens: answer.promptTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: answer.promptTokens + output,
  };
}

function outputItem(answer: Answer, done: boolean) {
  return {
    id: `msg_${answer.id}`,
    type: "message",
    status: done ? "completed" : "in_progress",
    role: "assistant",
    content: done
      ? [{ type: "output_text", text: text(answer), annotations: [] }]
      : [],
  };
}

function responseObject(answer: Answer, done: boolean) {
  return {
    id: `resp_${answer.id}`,
    object: "response",
    created_at: answer.createdSecs,
    status: done ? "completed" : "in_progress",
    error: null,
    incomplete_details: null,
    instructions: null,
    model: answer.model,
    output: done ? [outputItem(answer, true)] : [],
    parallel_tool_calls: true,
    tool_choice: "auto",
    tools: [],
    usage: done ? responsesUsage(answer) : null,
  };
}

function responsesStream(answer: Answer): StreamEvents {
  let seq = 0;
  const ev = (type: string, fields: object) =>
    sseEvent(type, { type, sequence_number: seq++, ...fields });
  const itemId = `msg_${answer.id}`;
  const at = { item_id: itemId, output_index: 0, content_index: 0 };
  const head = [
    ev("response.created", { response: responseObject(answer, false) }),
    ev("response.in_progress", { response: responseObject(answer, false) }),
    ev("response.output_item.added", {
      output_index: 0,
      item: outputItem(answer, false),
    }),
    ev("response.content_part.added", {
      ...at,
      part: { type: "output_text", text: "", annotations: [] },
    }),
  ];
  const perWord = answer.words.map((w) =>
    ev("response.output_text.delta", { ...at, delta: w, logprobs: [] })
  );
  const tail = [
    ev("response.output_text.done", {
      ...at,
      text: text(answer),
      logprobs: [],
    }),
    ev("response.content_part.done", {
      ...at,
      part: { type: "output_text", text: text(answer), annotations: [] },
    }),
    ev("response.output_item.done", {
      output_index: 0,
      item: outputItem(answer, true),
    }),
    ev("response.completed", { response: responseObject(answer, true) }),
  ];
  return { head, perWord, tail };
}

// ---- Anthropic Messages API ----------------------------------------------

function messagesStream(answer: Answer): StreamEvents {
  const head = [
    sseEvent("message_start", {
      type: "message_start",
      message: {
        id: answer.id,
        type: "message",
        role: "assistant",
        model: answer.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: answer.promptTokens, output_tokens: 1 },
      },
    }),
    sseEvent("content_block_start", {
      type: "content_block_start",
      index: 0,
      content_block: { type: "text", text: "" },
    }),
  ];
  const perWord = answer.words.map((w) =>
    sseEvent("content_block_delta", {
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text: w },
    })
  );
  const tail = [
    sseEvent("content_block_stop", { type: "content_block_stop", index: 0 }),
    sseEvent("message_delta", {
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: answer.words.length },
    }),
    sseEvent("message_stop", { type: "message_stop" }),
  ];
  return { head, perWord, tail };
}

function messagesBody(answer: Answer): unknown {
  return {
    id: answer.id,
    type: "message",
    role: "assistant",
    model: answer.model,
    content: [{ type: "text", text: text(answer) }],
    stop_reason: "end_turn",
    stop_sequence: null,
    usage: {
      input_tokens: answer.promptTokens,
      output_tokens: answer.words.length,
    },
  };
}

/** Each API's stream and whole body of an answer. */
const SHAPES: Record<
  Api,
  { stream(a: Answer): StreamEvents; body(a: Answer): unknown }
> = {
  chat: { stream: chatStream, body: chatBody },
  completions: { stream: completionsStream, body: completionsBody },
  responses: { stream: responsesStream, body: (a) => responseObject(a, true) },
  messages: { stream: messagesStream, body: messagesBody },
};

export function streamEvents(api: Api, answer: Answer): StreamEvents {
  return SHAPES[api].stream(answer);
}

export function jsonBody(api: Api, answer: Answer): unknown {
  return SHAPES[api].body(answer);
}

/** The route's own error shape: Anthropic's `{"type":"error",…}`, else OpenAI's. */
export function errorBody(api: Api, status: number, message: string): unknown {
  if (api === "messages") {
    return {
      type: "error",
      error: {
        type: status >= 500 ? "api_error" : "invalid_request_error",
        message,
      },
    };
  }
  return {
    error: { message, type: "mock_error", param: null, code: String(status) },
  };
}
