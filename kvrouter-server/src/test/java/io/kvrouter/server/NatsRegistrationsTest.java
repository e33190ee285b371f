package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.KvSource;
import io.kvrouter.transport.kvevents.ClearScope;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The wire form of the NATS registration log: what {@link NatsRegistrations#json} writes, the
 * {@code /register} and {@code /unregister} parsers read back as the same request (every field of
 * the record, base_url included), and fields a newer server adds are skipped.
 */
class NatsRegistrationsTest {
  @Test
  void aRegistrationReadsBackAsTheSameRequest() {
    Requests.Register plain =
        new Requests.Register(
            new ModelKey("m", "g"),
            16,
            new Worker(-1L, 3),
            null,
            null,
            null,
            16,
            4096,
            null,
            EngineRole.BOTH,
            ClearScope.DEVICE,
            KvSource.EVENTS);
    assertThat(Requests.register(NatsRegistrations.json(plain))).isEqualTo(plain);
    Requests.Register zmq =
        new Requests.Register(
            new ModelKey("m", "default"),
            4,
            new Worker(7, 0),
            "tcp://10.0.0.5:5557",
            "tcp://10.0.0.5:5558",
            "kv",
            16,
            0,
            "http://10.0.0.5:8000",
            EngineRole.PREFILL,
            ClearScope.DEVICE,
            KvSource.EVENTS);
    assertThat(Requests.register(NatsRegistrations.json(zmq))).isEqualTo(zmq);
    Requests.Register sglang =
        new Requests.Register(
            new ModelKey("m", "default"),
            4,
            new Worker(9, 0),
            "tcp://10.0.0.6:5557",
            null,
            "",
            4,
            0,
            null,
            EngineRole.BOTH,
            ClearScope.ALL_TIERS,
            null);
    assertThat(Requests.register(NatsRegistrations.json(sglang))).isEqualTo(sglang);
    Requests.Register decode =
        new Requests.Register(
            new ModelKey("m", "default"),
            4,
            new Worker(8, 0),
            null,
            null,
            null,
            4,
            0,
            null,
            EngineRole.DECODE,
            ClearScope.DEVICE,
            KvSource.PREDICTED);
    assertThat(Requests.register(NatsRegistrations.json(decode))).isEqualTo(decode);
    // unsigned instance ids are written as unsigned numbers
    assertThat(new String(NatsRegistrations.json(plain), StandardCharsets.UTF_8))
        .startsWith("{\"instance_id\":18446744073709551615,\"dp_rank\":3,");
  }

  @Test
  void anUnregistrationReadsBackAsTheSameRequest() {
    for (Requests.Unregister u :
        new Requests.Unregister[] {
          new Requests.Unregister("m", null, 5, -1), new Requests.Unregister("m", "g", 5, 2)
        }) {
      assertThat(Requests.unregister(NatsRegistrations.json(u))).isEqualTo(u);
    }
  }

  @Test
  void fieldsANewerServerWritesAreSkipped() {
    byte[] newer =
        ("{\"instance_id\":1,\"dp_rank\":0,\"model_name\":\"m\",\"routing_group\":\"default\","
                + "\"block_size\":4,\"capacity_blocks\":0,\"labels\":{\"zone\":\"a\"}}")
            .getBytes(StandardCharsets.UTF_8);
    assertThat(Requests.register(newer))
        .isEqualTo(
            new Requests.Register(
                new ModelKey("m", "default"),
                4,
                new Worker(1, 0),
                null,
                null,
                null,
                4,
                0,
                null,
                EngineRole.BOTH,
                ClearScope.DEVICE,
                null));
  }
}
