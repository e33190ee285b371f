package io.kvrouter.index;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.StringJoiner;

/**
 * The KV cache groups of a model, in the engine's group order (vLLM's {@code group_idx}), one of
 * them the <em>main</em> group: the first full-attention group, whose blocks the router's index
 * holds as for any model. A model with one group is not hybrid.
 *
 * <p>The command-line form is the groups' forms separated by commas, e.g. {@code full,sliding:4096}
 * (gpt-oss, Gemma 3), {@code full,state} (Jamba, Qwen3-Next, Nemotron-H).
 */
public final class KvCacheGroups {
  private final List<KvCacheGroup> groups;
  private final int main;

  private KvCacheGroups(List<KvCacheGroup> groups) {
    this.groups = List.copyOf(groups);
    int m = -1;
    for (int i = 0; i < this.groups.size(); i++) {
      if (this.groups.get(i).kind() == KvCacheGroup.Kind.FULL) {
        m = i;
        break;
      }
    }
    if (this.groups.isEmpty()) {
      throw new IllegalArgumentException("a model has at least one KV cache group");
    }
    if (m < 0) {
      throw new IllegalArgumentException(
          "KV cache groups "
              + describe(this.groups)
              + " have no full-attention group: kvrouter scores a hybrid model from its"
              + " full-attention blocks, so at least one group must be 'full'");
    }
    this.main = m;
  }

  /**
   * The groups {@code groups}, in the engine's order.
   *
   * @throws IllegalArgumentException when there is none, or none is full attention
   */
  public static KvCacheGroups of(List<KvCacheGroup> groups) {
    Objects.requireNonNull(groups, "groups");
    return new KvCacheGroups(groups);
  }

  /** One full-attention group: a model that is not hybrid. */
  public static KvCacheGroups single() {
    return new KvCacheGroups(List.of(KvCacheGroup.full()));
  }

  /**
   * The groups named by {@code text}, e.g. {@code full,sliding:4096}.
   *
   * @throws IllegalArgumentException with the accepted forms when a group is malformed, or when
   *     there is none or no full-attention group
   */
  public static KvCacheGroups parse(String text) {
    Objects.requireNonNull(text, "text");
    List<KvCacheGroup> out = new ArrayList<>();
    for (String part : text.split(",", -1)) {
      if (part.isBlank()) {
        throw new IllegalArgumentException(
            "KV cache groups '" + text + "': an empty group (use e.g. full,sliding:4096)");
      }
      out.add(KvCacheGroup.parse(part));
    }
    return new KvCacheGroups(out);
  }

  /** The groups, in the engine's order. */
  public List<KvCacheGroup> groups() {
    return groups;
  }

  /** How many groups there are. */
  public int size() {
    return groups.size();
  }

  /** The group at {@code index}. */
  public KvCacheGroup get(int index) {
    return groups.get(index);
  }

  /** The index of the main group: the first full-attention one. */
  public int mainGroup() {
    return main;
  }

  /** Whether the model has more than one group. */
  public boolean isHybrid() {
    return groups.size() > 1;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof KvCacheGroups g && groups.equals(g.groups);
  }

  @Override
  public int hashCode() {
    return groups.hashCode();
  }

  /** The command-line form, e.g. {@code full,sliding:4096}. */
  @Override
  public String toString() {
    return describe(groups);
  }

  private static String describe(List<KvCacheGroup> groups) {
    StringJoiner j = new StringJoiner(",");
    for (KvCacheGroup g : groups) j.add(g.toString());
    return j.toString();
  }
}
