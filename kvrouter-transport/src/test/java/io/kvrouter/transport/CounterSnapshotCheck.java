package io.kvrouter.transport;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.RecordComponent;
import java.util.Locale;
import java.util.function.Function;

/**
 * Checks that a statistics record built from {@link SingleWriterCounters} by slot position reads
 * each slot into the component of its name: the component at the slot's position is named after the
 * constant, in camel case, with at most a suffix ({@code GAPS} → {@code gaps()}, {@code STORED} →
 * {@code storedEvents()}), and reads that slot's value. A constant added, removed or moved on one
 * side only fails it.
 */
public final class CounterSnapshotCheck {
  private CounterSnapshotCheck() {}

  /** Gives every slot a distinct value and reads each back through its named component. */
  public static <E extends Enum<E>, R extends Record> void eachSlotReadsIntoItsComponent(
      Class<E> slots, Class<R> record, Function<SingleWriterCounters<E>, R> snapshot)
      throws ReflectiveOperationException {
    E[] constants = slots.getEnumConstants();
    RecordComponent[] components = record.getRecordComponents();
    assertThat(components).as("components of %s", record.getSimpleName()).hasSize(constants.length);
    SingleWriterCounters<E> counters = new SingleWriterCounters<>(slots);
    for (E c : constants) counters.add(c, 1000L + 7L * c.ordinal());
    R r = snapshot.apply(counters);
    for (E c : constants) {
      RecordComponent component = components[c.ordinal()];
      assertThat(component.getName())
          .as("component %d of %s, for slot %s", c.ordinal(), record.getSimpleName(), c)
          .startsWith(camel(c.name()));
      Object v = component.getAccessor().invoke(r);
      assertThat(v)
          .as("%s.%s() from slot %s", record.getSimpleName(), component.getName(), c)
          .isEqualTo(1000L + 7L * c.ordinal());
    }
  }

  private static String camel(String constant) {
    StringBuilder b = new StringBuilder();
    boolean up = false;
    for (char ch : constant.toLowerCase(Locale.ROOT).toCharArray()) {
      if (ch == '_') {
        up = true;
      } else {
        b.append(up ? Character.toUpperCase(ch) : ch);
        up = false;
      }
    }
    return b.toString();
  }
}
