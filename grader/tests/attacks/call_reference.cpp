// what: declares the reference's softmax itself and calls it (the reference is not in the lab process)
// expect: rejected by the grader's checks of lab code
// --- top
namespace reference {
template <class R> Eigen::Matrix<R, -1, -1> softmax_rows(const Eigen::Matrix<R, -1, -1>&);
}
// --- body
if (x.rows() < 0) (void)reference::softmax_rows<double>(Eigen::MatrixXd());
