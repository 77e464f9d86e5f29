/**
 * Key naming. Keys that one Lua script touches must live in one Redis Cluster slot, so they
 * share a hash tag: only the part in braces is hashed. The installation prefix is added by the
 * client (ioredis keyPrefix), outside the tag.
 */

/** `{value}` with any braces in `value` replaced, so the tag is exactly what was given. */
function hashTag(value: string): string {
  const safe = value.includes('{') || value.includes('}') ? value.replace(/[{}]/g, '_') : value;
  return `{${safe}}`;
}

/** Joins parts with ":" (the Redis convention). */
function key(...parts: readonly string[]): string {
  return parts.join(':');
}

export { hashTag, key };
