package io.kvrouter.discovery;

import java.util.Locale;

/** Why a discovered engine is removed ({@link EngineSink#remove}). */
public enum RemovalReason {
  /** The pod is no longer Ready (its readiness probe fails), or it lost its IP. */
  NOT_READY,
  /** The pod is being deleted ({@code metadata.deletionTimestamp} is set). */
  TERMINATING,
  /**
   * The pod left the selection: deleted, or re-labelled out of the label selector (a watch reports
   * both alike), or no longer listed when the pods were listed again.
   */
  GONE,
  /** The InferencePool's selector changed and no longer selects the pod, or the pool is gone. */
  UNSELECTED,
  /** The pod's {@code kvrouter.io/*} annotations or named ports became invalid. */
  INVALID,
  /**
   * What the engine is changed (annotations, ports, the pool's target ports, a new pod under the
   * same name): the engine is added again with the new fields once the removal completes.
   */
  CHANGED;

  /** The lower-case name ({@code "not_ready"}, ...), for logs and metric labels. */
  public String wireName() {
    return name().toLowerCase(Locale.ROOT);
  }
}
