package io.kvrouter.route;

import io.kvrouter.event.Worker;

/**
 * One worker rank that a request could go to, with the load terms of DESIGN.md §6 as they would be
 * if the request went there.
 *
 * @param worker the worker rank
 * @param overlapBlocks leading blocks of the request that the index says this worker caches
 * @param cachedBlocks distinct blocks the index says this worker caches in all, for tie-breaks (0
 *     when it caches none of the request's leading blocks: the index reports sizes only for the
 *     workers it matched)
 * @param prefillBlocks {@code (activePrefillTokens + isl − overlapBlocks·blockSize) / blockSize}:
 *     the prefill work queued on the worker with this request, in blocks (the request's own part is
 *     never negative)
 * @param decodeBlocks the worker's active blocks after adding the request's blocks that are not
 *     already active there
 */
public record Candidate(
    Worker worker, int overlapBlocks, int cachedBlocks, double prefillBlocks, int decodeBlocks) {}
