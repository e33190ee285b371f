package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.StreamReadConstraints;

/**
 * The gateway's Jackson factory. JSON values that go to the chat templates (messages, tools,
 * chat_template_kwargs) are read with the tokenizer module's {@link
 * io.kvrouter.tokenize.JsonValues}.
 */
final class Json {
  private Json() {}

  static final JsonFactory FACTORY =
      JsonFactory.builder()
          .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(200).build())
          .build();
}
