package io.kvrouter.server;

/** Which index a request is about: one per model name and routing group. */
record ModelKey(String modelName, String routingGroup) implements Comparable<ModelKey> {
  static final String DEFAULT_GROUP = "default";

  ModelKey {
    if (routingGroup == null) routingGroup = DEFAULT_GROUP;
  }

  @Override
  public int compareTo(ModelKey o) {
    int c = modelName.compareTo(o.modelName);
    return c != 0 ? c : routingGroup.compareTo(o.routingGroup);
  }

  /** For messages: {@code model 'm' (routing group 'g')}. */
  String describe() {
    return "model '" + modelName + "' (routing group '" + routingGroup + "')";
  }
}
