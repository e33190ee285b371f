package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import org.junit.jupiter.api.Test;

/** The conformance suite through a {@link ForwardingKvIndex} that overrides nothing. */
class ForwardingConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return new ForwardingKvIndex(KvIndexes.concurrentRadixTree()) {};
  }

  /** A method added to KvIndex must be forwarded too, not left to a default or to subclasses. */
  @Test
  void forwardsEveryMethodOfKvIndex() throws NoSuchMethodException {
    int checked = 0;
    for (Method m : KvIndex.class.getMethods()) {
      if (Modifier.isStatic(m.getModifiers())) continue;
      Method f = ForwardingKvIndex.class.getMethod(m.getName(), m.getParameterTypes());
      assertThat(f.getDeclaringClass()).as(m.getName()).isEqualTo(ForwardingKvIndex.class);
      checked++;
    }
    assertThat(checked).isGreaterThanOrEqualTo(9);
  }
}
