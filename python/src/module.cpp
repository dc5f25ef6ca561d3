#include "bindings.h"

namespace nngraph::py_bind {

PYBIND11_MODULE(_core, m) {
  m.doc() = "nngraph native engine";
  init_errors(m);
  init_core(m);
  init_image(m);
  init_optimizers(m);
  init_data_source(m);
  init_nodes(m);
  init_layers(m);
  init_rnn(m);
  init_losses(m);
  init_graph(m);
  init_dataset(m);
}

}  // namespace nngraph::py_bind
