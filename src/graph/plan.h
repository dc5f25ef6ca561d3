#pragma once
// Shape-independent structure of a graph (order, fusion, aliases) and the per-shape plan
// (descriptors and arena offsets) derived from it.
#include <string>
#include <vector>

#include "nngraph/nodes.h"

namespace nngraph {

struct Step {
  const FilterNode* node;
  std::vector<int> inputs;  // tensor ids
  int output;
  NeuronDescriptor fused;
};

// Tensors 0..S-1 are the graph sources; tensor S+i is the result of order[i].
struct Structure {
  std::vector<ImageNodePtr> sources;
  std::vector<FilterNode*> order;
  std::vector<std::vector<int>> node_inputs;  // per order[i]
  std::vector<int> results;                   // tensor ids
  std::vector<int> root;                      // tensor whose memory a tensor uses
  std::vector<Step> steps;
  size_t tensor_count() const { return sources.size() + order.size(); }
};

// Walks back from the results, orders nodes, numbers default labels, folds neurons into
// convolutions and aliases identity nodes. Throws on a result that no filter produced.
Structure build_structure(const std::vector<ImageNodePtr>& results);

struct Plan {
  std::vector<ImageShape> shapes;  // per tensor
  std::vector<size_t> offset;      // per root tensor, floats per image in the arena
  size_t arena = 0;                // floats per image
  size_t naive = 0;                // floats per image with one buffer per filter result
};

// Infers every shape (errors name the node) and places intermediates in one arena.
Plan make_plan(const Structure& s, const std::vector<ImageShape>& source_shapes);

}  // namespace nngraph
