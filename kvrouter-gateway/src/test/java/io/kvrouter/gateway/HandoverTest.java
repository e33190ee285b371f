package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The hand-over bodies field by field, as vLLM's disaggregated serving proxy for the NixlConnector
 * (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py) writes them.
 */
class HandoverTest {
  static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static String s(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }

  @Test
  void thePrefillRequestAsksForOneUnstreamedTokenAndARemoteDecode() {
    String client =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true},\"max_tokens\":50,"
            + "\"max_completion_tokens\":50,\"min_tokens\":3,\"min_completion_tokens\":3,"
            + "\"temperature\":0.5,\"kv_transfer_params\":{\"x\":1}}";
    assertThat(s(Handover.prefillBody(b(client))))
        .isEqualTo(
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                + "\"max_completion_tokens\":1,\"temperature\":0.5,"
                + "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,"
                + "\"remote_engine_id\":null,\"remote_block_ids\":null,\"remote_host\":null,"
                + "\"remote_port\":null},\"stream\":false,\"max_tokens\":1}");
    // without max_completion_tokens none is added
    assertThat(s(Handover.prefillBody(b("{\"prompt\":[1,2]}"))))
        .isEqualTo(
            "{\"prompt\":[1,2],\"kv_transfer_params\":{\"do_remote_decode\":true,"
                + "\"do_remote_prefill\":false,\"remote_engine_id\":null,\"remote_block_ids\":null,"
                + "\"remote_host\":null,\"remote_port\":null},\"stream\":false,\"max_tokens\":1}");
  }

  @Test
  void theDecodeRequestIsTheClientsWithThePrefillAnswersParams() {
    byte[] answer =
        b(
            "{\"id\":\"x\",\"choices\":[],\"kv_transfer_params\":{\"do_remote_prefill\":true,"
                + "\"do_remote_decode\":false,\"remote_block_ids\":[1,2,3],"
                + "\"remote_engine_id\":\"e\",\"remote_host\":\"h\",\"remote_port\":5600},"
                + "\"usage\":{}}");
    byte[] params = Handover.kvTransferParams(answer);
    assertThat(s(params))
        .isEqualTo(
            "{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[1,2,3],"
                + "\"remote_engine_id\":\"e\",\"remote_host\":\"h\",\"remote_port\":5600}");
    String client = "{\"model\":\"m\",\"kv_transfer_params\":null,\"stream\":true}";
    assertThat(s(Handover.decodeBody(b(client), params)))
        .isEqualTo("{\"model\":\"m\",\"stream\":true,\"kv_transfer_params\":" + s(params) + "}");
  }

  @Test
  void anAnswerWithoutParamsLeavesTheClientsRequestAsItIs() {
    for (String a :
        new String[] {
          "{\"id\":\"x\"}", "{\"kv_transfer_params\":null}", "{\"kv_transfer_params\":{}}", "[1]"
        }) {
      assertThat(Handover.kvTransferParams(b(a))).as(a).isNull();
    }
    byte[] client = b("{\"model\":\"m\"}");
    assertThat(Handover.decodeBody(client, null)).isSameAs(client);
  }
}
