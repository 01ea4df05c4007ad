// The cluster replica's import surface (issue 16): shell/server/cluster and sim/.
export {
  type Applied,
  applyRecord,
  type ClusterState,
  DEFAULT_LIVENESS,
  initialClusterState,
  type InstanceView,
  isLive,
  type Liveness,
} from "./replica.ts";
export {
  type ClusterRecord,
  decodeRecord,
  encodeRecord,
  type InstanceId,
  REDUCER_VERSION,
} from "./record.ts";
export {
  configDigest,
  decodeSnapshot,
  digestOf,
  encodeSnapshot,
  stateDigest,
} from "./snapshot.ts";
