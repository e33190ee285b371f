package io.kvrouter.transport.zmq;

/**
 * Counters of a {@link ZmqEventSubscriber} since it started (summed over its engines).
 *
 * @param messages messages received on the live socket
 * @param badFrames live messages skipped for their shape: not 3 frames, a sequence frame that is
 *     not 8 bytes or is negative, a topic no registered engine uses
 * @param batches payloads decoded and converted (live and replayed)
 * @param decodeErrors payloads rejected whole as malformed
 * @param storedEvents {@code Stored} router events handed to the sink
 * @param removedEvents {@code Removed} router events handed to the sink
 * @param clearedEvents {@code Cleared} router events handed to the sink (engine clears and
 *     restarts)
 * @param offDeviceEvents of those, events about a tier other than the device
 * @param skippedEvents engine events left out: unknown types, secondary KV cache groups
 * @param refusedEvents {@code BlockStored} events with a block size other than the registered one
 * @param partialBlocks engine blocks not indexed because their tokens were incomplete
 * @param selfReferencing batches dropped because a block named itself as its ancestor
 * @param duplicates messages skipped because their sequence number was already applied, or because
 *     the engine's replay shows they are not part of its history (late messages from before a
 *     restart)
 * @param gaps sequence gaps detected on the live socket
 * @param lostMessages sequence numbers never applied (no replay, or missing from the replay)
 * @param replays replay requests sent
 * @param replayedMessages batches received through replay and applied
 * @param replayFailures replays abandoned (no answer in time, malformed reply)
 * @param restarts engine restarts detected (sequence went back, or replay showed another history)
 * @param connections connections completed (handshakes) on the live socket
 * @param reconnects of those, connections made again after a disconnect
 * @param disconnects disconnections of the live socket
 * @param sinkErrors events the sink threw on
 * @param tailProbes replays asked because an engine with a replay endpoint fell silent after
 *     publishing (nothing in the protocol announces a last sequence, so a lost tail of a burst
 *     shows no gap until the engine publishes again)
 * @param tailRecovered batches such probes found in the engine's replay buffer and applied: the
 *     tail of a burst that never arrived on the live socket (also counted in {@code
 *     replayedMessages})
 * @param lagMicros the sum over applied batches with a timestamp of (applied − the batch's {@code
 *     ts}) in microseconds of wall-clock time (0 where the engine's clock is ahead): publish to
 *     applied, replayed batches included
 * @param lagBatches the batches in {@code lagMicros}; their mean lag is lagMicros / lagBatches
 * @param placeholderEvents off-device stores without token ids, left out (vLLM's
 *     OffloadingConnector without {@code self_describing_kv_events}: the router cannot hash their
 *     blocks)
 */
public record IngestStats(
    long messages,
    long badFrames,
    long batches,
    long decodeErrors,
    long storedEvents,
    long removedEvents,
    long clearedEvents,
    long offDeviceEvents,
    long skippedEvents,
    long refusedEvents,
    long partialBlocks,
    long selfReferencing,
    long duplicates,
    long gaps,
    long lostMessages,
    long replays,
    long replayedMessages,
    long replayFailures,
    long restarts,
    long connections,
    long reconnects,
    long disconnects,
    long sinkErrors,
    long tailProbes,
    long tailRecovered,
    long lagMicros,
    long lagBatches,
    long placeholderEvents) {}
