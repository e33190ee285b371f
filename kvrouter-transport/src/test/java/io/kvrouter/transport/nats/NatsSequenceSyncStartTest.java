package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.route.KvRouter;
import io.nats.client.Connection;
import io.nats.client.Dispatcher;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A sync that cannot start leaves nothing running behind it. */
class NatsSequenceSyncStartTest {

  @Test
  void aRefusedSubscribeClosesTheDispatchersAlreadyMade() {
    List<Dispatcher> made = new ArrayList<>();
    List<Dispatcher> closed = new ArrayList<>();
    int[] subscribes = {0};
    Connection nc =
        (Connection)
            Proxy.newProxyInstance(
                getClass().getClassLoader(),
                new Class<?>[] {Connection.class},
                (proxy, m, args) ->
                    switch (m.getName()) {
                      case "getMaxPayload" -> 1L << 20;
                      case "createDispatcher" -> {
                        Dispatcher d =
                            (Dispatcher)
                                Proxy.newProxyInstance(
                                    getClass().getClassLoader(),
                                    new Class<?>[] {Dispatcher.class},
                                    (p2, m2, a2) -> {
                                      if (m2.getName().equals("subscribe")) {
                                        // the second subscription fails, as on a closing link
                                        if (++subscribes[0] == 2) {
                                          throw new IllegalStateException("Connection is Closed");
                                        }
                                        return p2;
                                      }
                                      if (m2.getName().equals("hashCode")) {
                                        return System.identityHashCode(p2);
                                      }
                                      if (m2.getName().equals("equals")) return p2 == a2[0];
                                      return null;
                                    });
                        made.add(d);
                        yield d;
                      }
                      case "closeDispatcher" -> {
                        closed.add((Dispatcher) args[0]);
                        yield null;
                      }
                      case "hashCode" -> System.identityHashCode(proxy);
                      case "equals" -> proxy == args[0];
                      default -> throw new UnsupportedOperationException(m.getName());
                    });
    try (KvRouter r = KvRouter.builder(16).build()) {
      assertThatThrownBy(
              () ->
                  NatsSequenceSync.builder(
                          nc, NatsSequenceSync.subject("m", "default"), r.sequenceSync("a"))
                      .start())
          .isInstanceOf(IllegalStateException.class)
          .hasMessage("Connection is Closed");
    }
    assertThat(made).hasSize(2);
    assertThat(closed).containsExactlyInAnyOrderElementsOf(made);
  }
}
