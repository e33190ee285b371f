package io.kvrouter.transport.kvevents;

import java.util.Objects;

/**
 * Decodes the msgpack payload of a vLLM or SGLang {@code KVEventBatch} (the third frame of a ZMQ KV
 * event message) into a {@link KvEventBatch}.
 *
 * <p>Both encodings engines have used are accepted, in any mix:
 *
 * <ul>
 *   <li>the batch as an array {@code [ts, events, data_parallel_rank?]} (msgspec {@code
 *       array_like}) or as a map with {@code ts}, {@code events} and one of {@code
 *       data_parallel_rank}, {@code attn_dp_rank} (SGLang) or {@code dp_rank};
 *   <li>each event as a tagged array {@code ["BlockStored", block_hashes, parent_block_hash,
 *       token_ids, block_size, lora_id?, medium?, lora_name?, extra_keys?, group_idx?,
 *       kv_cache_spec_kind?, kv_cache_spec_sliding_window?]}, {@code ["BlockRemoved", block_hashes,
 *       medium?, group_idx?]}, {@code ["AllBlocksCleared"]}, or as a map whose {@code type} names
 *       the event and whose other keys are the field names above (plus {@code cache_salt}; a
 *       map-form removal may also carry {@code kv_cache_spec_kind}).
 * </ul>
 *
 * <p>Trailing optional fields may be missing (older releases stop after {@code lora_id}); fields
 * and positions this decoder does not know are skipped whatever their shape; events of an unknown
 * type are counted in {@link KvEventBatch#skipped()} and left out. A block hash may be an unsigned
 * 64-bit integer, a signed 64-bit integer (SGLang) or raw bytes (vLLM's default), which become the
 * unsigned value of their last 8 bytes, big-endian, exactly as vLLM's own int conversion does.
 *
 * <p>Anything else — a wrong type, a missing required field, a duplicated field, an integer out of
 * range, bytes that are not msgpack, a truncated payload, bytes after the batch — is a {@link
 * KvEventDecodeException} naming the field, the problem and the byte offset. Decoding is
 * all-or-nothing: a batch is returned whole or not at all. All methods are thread-safe.
 */
public final class KvEventDecoder {
  /*
   * Implementation notes
   *
   * Stateless facade: each call runs a fresh BatchReader (one msgpack-core MessageUnpacker over
   * the caller's bytes, used by one thread, then dropped). See BatchReader for the grammar and
   * how errors are located.
   */

  private KvEventDecoder() {}

  /** Decodes one whole payload. */
  public static KvEventBatch decode(byte[] payload) {
    Objects.requireNonNull(payload, "payload");
    return new BatchReader(payload, 0, payload.length).read();
  }

  /** Decodes the payload in {@code payload[offset, offset + length)}. */
  public static KvEventBatch decode(byte[] payload, int offset, int length) {
    Objects.checkFromIndexSize(offset, length, Objects.requireNonNull(payload, "payload").length);
    return new BatchReader(payload, offset, length).read();
  }
}
